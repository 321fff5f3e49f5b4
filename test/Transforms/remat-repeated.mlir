// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-remat=budget=2400 -split-input-file | FileCheck %s
// The exact solver's choice is merged the same way (it takes a and b too).
// RUN: %if cbc %{ gpuc-opt %s --gpuc-form-kernels --gpuc-remat="budget=2400 solver=milp" -split-input-file | FileCheck %s --check-prefix=MILP %}
// MILP: gpuc.remat = {budget = 2400 : i64, extra_flops = 4608 : i64, merged = 1 : i64, optimal = true,
// MILP: gpuc.remat = {budget = 2400 : i64, extra_flops = 5120 : i64, merged = 0 : i64, optimal = true,

// Once the budget is met, a forward value recomputed twice is recomputed
// once where the budget allows. GEMM results a (cheap) and b = a·wb are
// kept for backward; b is read before a 2048-byte temporary, a after a
// 1024-byte one. Meeting the budget takes both recomputations: a first
// (the better bytes per FLOP), before its reader; then b before its
// reader, which needs a there, earlier than a's recomputation, so a is
// recomputed again. a's reader can read that earlier recomputation (512
// bytes more across the 1024-byte temporary, within the budget), and the
// later one is gone: 512 FLOPs less.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: gpuc.remat = {budget = 2400 : i64, extra_flops = 4608 : i64, merged = 1 : i64, peak = 2176 : i64, peak_before = 3200 : i64, recomputed = 2 : i64, solver = "greedy"}
// CHECK: %[[A:.+]] = gpuc.matmul %arg0, %arg1 :
// CHECK: gpuc.matmul %[[A]], %arg2 :
// CHECK: %[[A2:.+]] = gpuc.matmul %arg0, %arg1 {gpuc.recompute}
// CHECK: gpuc.matmul %[[A2]], %arg2 {gpuc.recompute}
// CHECK: gpuc.matmul %arg5, %arg6 :
// CHECK: gpuc.fusion(%[[A2]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.reduce_max
// CHECK-NOT: gpuc.recompute
func.func @train_step(%xa: tensor<8x2xf32> {gpuc.input = "xa"}, %wa: tensor<2x16xf32> {gpuc.input = "wa"},
                      %wb: tensor<16x16xf32> {gpuc.input = "wb"},
                      %x0: tensor<8x4xf32> {gpuc.input = "x0"}, %w0: tensor<4x64xf32> {gpuc.input = "w0"},
                      %x2: tensor<8x4xf32> {gpuc.input = "x2"}, %w2: tensor<4x32xf32> {gpuc.input = "w2"})
    -> (tensor<f32> {gpuc.output = "loss"}, tensor<f32> {gpuc.output = "r0"}, tensor<f32> {gpuc.output = "rb"},
        tensor<f32> {gpuc.output = "r2"}, tensor<f32> {gpuc.output = "ra"}) {
  %a = gpuc.matmul %xa, %wa : (tensor<8x2xf32>, tensor<2x16xf32>) -> tensor<8x16xf32>
  %b = gpuc.matmul %a, %wb : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %sa = gpuc.reduce_sum %a axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %sb = gpuc.reduce_sum %b axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %l = gpuc.add %sa, %sb : tensor<f32>
  %big0 = gpuc.matmul %x0, %w0 : (tensor<8x4xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  %r0 = gpuc.reduce_max %big0 axes = [0, 1] : tensor<8x64xf32> -> tensor<f32>
  %rb = gpuc.reduce_max %b axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %big2 = gpuc.matmul %x2, %w2 : (tensor<8x4xf32>, tensor<4x32xf32>) -> tensor<8x32xf32>
  %r2 = gpuc.reduce_max %big2 axes = [0, 1] : tensor<8x32xf32> -> tensor<f32>
  %ra = gpuc.reduce_max %a axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l, %r0, %rb, %r2, %ra : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// The same with a 2048-byte temporary before a's reader: reading the
// earlier recomputation there would pass the budget, so a stays
// recomputed twice.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: gpuc.remat = {budget = 2400 : i64, extra_flops = 5120 : i64, merged = 0 : i64, peak = 2304 : i64, peak_before = 3264 : i64, recomputed = 2 : i64, solver = "greedy"}
// CHECK: gpuc.matmul %arg0, %arg1 {gpuc.recompute}
// CHECK: gpuc.matmul %{{.+}}, %arg2 {gpuc.recompute}
// CHECK: gpuc.matmul %arg5, %arg6 :
// CHECK: %[[A3:.+]] = gpuc.matmul %arg0, %arg1 {gpuc.recompute}
// CHECK: gpuc.fusion(%[[A3]])
func.func @train_step(%xa: tensor<8x2xf32> {gpuc.input = "xa"}, %wa: tensor<2x16xf32> {gpuc.input = "wa"},
                      %wb: tensor<16x16xf32> {gpuc.input = "wb"},
                      %x0: tensor<8x4xf32> {gpuc.input = "x0"}, %w0: tensor<4x64xf32> {gpuc.input = "w0"},
                      %x2: tensor<8x4xf32> {gpuc.input = "x2"}, %w2: tensor<4x64xf32> {gpuc.input = "w2"})
    -> (tensor<f32> {gpuc.output = "loss"}, tensor<f32> {gpuc.output = "r0"}, tensor<f32> {gpuc.output = "rb"},
        tensor<f32> {gpuc.output = "r2"}, tensor<f32> {gpuc.output = "ra"}) {
  %a = gpuc.matmul %xa, %wa : (tensor<8x2xf32>, tensor<2x16xf32>) -> tensor<8x16xf32>
  %b = gpuc.matmul %a, %wb : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %sa = gpuc.reduce_sum %a axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %sb = gpuc.reduce_sum %b axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %l = gpuc.add %sa, %sb : tensor<f32>
  %big0 = gpuc.matmul %x0, %w0 : (tensor<8x4xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  %r0 = gpuc.reduce_max %big0 axes = [0, 1] : tensor<8x64xf32> -> tensor<f32>
  %rb = gpuc.reduce_max %b axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %big2 = gpuc.matmul %x2, %w2 : (tensor<8x4xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  %r2 = gpuc.reduce_max %big2 axes = [0, 1] : tensor<8x64xf32> -> tensor<f32>
  %ra = gpuc.reduce_max %a axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l, %r0, %rb, %r2, %ra : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}
