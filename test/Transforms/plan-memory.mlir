// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-plan-memory -split-input-file | FileCheck %s
// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-fuse --gpuc-plan-memory -split-input-file | FileCheck %s --check-prefix=FUSED

// A pointwise chain: each kernel writes over the operand that dies in it,
// so the whole chain lives in one 64-byte slot.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: gpuc.memory = {arena_peak = 64 : i64, forward_end = -1 : i64, kept_for_backward = 0 : i64, lower_bound = 64 : i64}
// CHECK: %[[A:.+]] = gpuc.fusion(%arg0) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]}
// CHECK: %[[B:.+]] = gpuc.fusion(%[[A]]) {gpuc.in_place = array<i64: 0>, gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]}
// CHECK: gpuc.fusion(%[[B]]) {gpuc.in_place = array<i64: 0>, gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]}
func.func @chain(%x: tensor<16xf32> {gpuc.input = "x"}) -> (tensor<16xf32> {gpuc.output = "y"}) {
  %a = gpuc.exp %x : tensor<16xf32>
  %b = gpuc.tanh %a : tensor<16xf32>
  %c = gpuc.neg %b : tensor<16xf32>
  return %c : tensor<16xf32>
}

// -----

// %a is read after %b is written, so they never share bytes; the add may
// overwrite %a, which dies there (the first operand that can).
// CHECK-LABEL: func.func @kept
// CHECK-SAME: arena_peak = 128 : i64
// CHECK-SAME: lower_bound = 128 : i64
// CHECK: %[[A:.+]] = gpuc.fusion(%arg0) {gpuc.slots = [#gpuc.slot<offset = [[OA:[0-9]+]], bytes = 64>]}
// CHECK: %[[B:.+]] = gpuc.fusion(%[[A]])
// CHECK-NOT: in_place
// CHECK-NOT: offset = [[OA]],
// CHECK-SAME: gpuc.slots = [#gpuc.slot<offset = {{[0-9]+}}, bytes = 64>]
// CHECK: gpuc.fusion(%[[A]], %[[B]]) {gpuc.in_place = array<i64: 0>, gpuc.slots = [#gpuc.slot<offset = [[OA]], bytes = 64>]}
func.func @kept(%x: tensor<16xf32> {gpuc.input = "x"}) -> (tensor<16xf32> {gpuc.output = "y"}) {
  %a = gpuc.exp %x : tensor<16xf32>
  %b = gpuc.tanh %a : tensor<16xf32>
  %c = gpuc.add %a, %b : tensor<16xf32>
  return %c : tensor<16xf32>
}

// -----

// A transpose reads other indices than it writes: never in place.
// CHECK-LABEL: func.func @transposed
// CHECK: gpuc.fusion(%arg0) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]}
// CHECK: gpuc.fusion(%{{.+}}) {gpuc.slots = [#gpuc.slot<offset = 64, bytes = 64>]}
func.func @transposed(%x: tensor<4x4xf32> {gpuc.input = "x"}) -> (tensor<4x4xf32> {gpuc.output = "y"}) {
  %a = gpuc.exp %x : tensor<4x4xf32>
  %t = gpuc.transpose %a perm = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %t : tensor<4x4xf32>
}

// -----

// The update of a parameter is written into it: no arena slot, no copy.
// CHECK-LABEL: func.func @update
// CHECK: gpuc.fusion(%arg0, %{{.+}}) {gpuc.in_place = array<i64: 0>, gpuc.slots = [#gpuc.slot<bytes = 32, param = @w>]}
// FUSED-LABEL: func.func @update
// FUSED-SAME: arena_peak = 0 : i64
// FUSED: gpuc.fusion(%arg1, %arg2, %arg0) {gpuc.in_place = array<i64: 2>, gpuc.slots = [#gpuc.slot<bytes = 32, param = @w>]}
gpuc.parameter @w trainable : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @update(%w: tensor<8xf32> {gpuc.param = @w}, %g: tensor<8xf32> {gpuc.input = "g"}, %lr: tensor<f32> {gpuc.hyper = "lr"}) -> (tensor<8xf32> {gpuc.update = @w}) {
  %lrb = gpuc.broadcast %lr : tensor<f32> -> tensor<8xf32>
  %d = gpuc.mul %g, %lrb : tensor<8xf32>
  %n = gpuc.sub %w, %d : tensor<8xf32>
  return %n : tensor<8xf32>
}

// -----

// The old value of @v is read after its update: the update goes to the
// arena (and the step program copies it back).
// CHECK-LABEL: func.func @read_after
// CHECK: gpuc.fusion(%arg0, %arg1) {gpuc.slots = [#gpuc.slot<offset = {{[0-9]+}}, bytes = 32>]}
gpuc.parameter @v trainable : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @read_after(%w: tensor<8xf32> {gpuc.param = @v}, %g: tensor<8xf32> {gpuc.input = "g"}) -> (tensor<8xf32> {gpuc.update = @v}, tensor<8xf32> {gpuc.output = "y"}) {
  %n = gpuc.sub %w, %g : tensor<8xf32>
  %m = gpuc.mul %w, %w : tensor<8xf32>
  return %n, %m : tensor<8xf32>, tensor<8xf32>
}

// -----

// A row kernel writes its per-row result over a per-row operand that dies
// in it (here a GEMM's result).
// FUSED-LABEL: func.func @row
// FUSED: gpuc.matmul
// FUSED: gpuc.fusion(%arg0, %{{.*}}) {gpuc.in_place = array<i64: 1>, gpuc.slots = [#gpuc.slot<offset = 0, bytes = 16>]}
func.func @row(%x: tensor<4x8xf32> {gpuc.input = "x"}, %w: tensor<8x1xf32> {gpuc.input = "w"}) -> (tensor<4xf32> {gpuc.output = "y"}) {
  %p = gpuc.matmul %x, %w : (tensor<4x8xf32>, tensor<8x1xf32>) -> tensor<4x1xf32>
  %q = gpuc.reshape %p : tensor<4x1xf32> -> tensor<4xf32>
  %s = gpuc.reduce_mean %x axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %r = gpuc.add %s, %q : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A reduction stays out of a parameter's update (gpuc-fuse), which writes
// the new value over the old one (batch norm's running statistics).
// FUSED-LABEL: func.func @running_statistic
// FUSED: gpuc.fusion(%arg0) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 16>]}
// FUSED: gpuc.fusion(%{{.*}}, %arg1) {gpuc.in_place = array<i64: 1>, gpuc.slots = [#gpuc.slot<bytes = 16, param = @rm>]}
gpuc.parameter @rm : tensor<4xf32> = dense<0.0> : tensor<4xf32>
func.func @running_statistic(%x: tensor<4x8xf32> {gpuc.input = "x"}, %rm: tensor<4xf32> {gpuc.param = @rm}) -> (tensor<4xf32> {gpuc.update = @rm}) {
  %s = gpuc.reduce_mean %x axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %r = gpuc.add %s, %rm : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A parameter's new value computed without reading the old one (a weight's
// 16-bit copy, cast from the new f32 weight) is written over it once
// nothing reads the old value: the kernel takes the parameter as an operand
// it never reads, and no copy ends the step.
// FUSED-LABEL: func.func @copy_over_parameter
// FUSED: gpuc.fusion(%arg0) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 4>]}
// FUSED: gpuc.fusion(%arg1, %arg0) {gpuc.in_place = array<i64: 1>, gpuc.slots = [#gpuc.slot<bytes = 16, param = @wh>]}
// FUSED-NEXT: ^bb0(%{{.*}}: tensor<8xf32>, %[[OLD:.+]]: tensor<8xf16>):
// FUSED-NOT: %[[OLD]]
// FUSED: gpuc.yield
gpuc.parameter @wh : tensor<8xf16> = dense<0.0> : tensor<8xf16>
func.func @copy_over_parameter(%wh: tensor<8xf16> {gpuc.param = @wh}, %w: tensor<8xf32> {gpuc.input = "w"}) -> (tensor<f32> {gpuc.output = "y"}, tensor<8xf16> {gpuc.update = @wh}) {
  %y = gpuc.cast %wh : tensor<8xf16> to tensor<8xf32>
  %s = gpuc.reduce_sum %y axes = [0] : tensor<8xf32> -> tensor<f32>
  %n = gpuc.cast %w : tensor<8xf32> to tensor<8xf16>
  return %s, %n : tensor<f32>, tensor<8xf16>
}

// -----

// The forward pass ends with the loss; what it leaves live for backward
// (the matmul's result, read by the relu gradient) is counted.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: forward_end = 3 : i64, kept_for_backward = 64 : i64
func.func @forward_backward(%x: tensor<4x4xf32> {gpuc.input = "x"}, %w: tensor<4x4xf32> {gpuc.input = "w"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<4x4xf32> {gpuc.output = "dx"}) {
  %h = gpuc.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = gpuc.relu %h : tensor<4x4xf32>
  %s = gpuc.reduce_sum %r axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %l = gpuc.neg %s : tensor<f32>
  %z = gpuc.constant dense<0.0> : tensor<4x4xf32>
  %m = gpuc.compare gt, %h, %z : tensor<4x4xf32>
  %d = gpuc.select %m, %h, %z : tensor<4x4xi1>, tensor<4x4xf32>
  return %l, %d : tensor<f32>, tensor<4x4xf32>
}
