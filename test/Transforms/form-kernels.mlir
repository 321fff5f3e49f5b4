// RUN: gpuc-opt %s --gpuc-form-kernels -split-input-file | FileCheck %s

// Every computing op becomes a one-op gpuc.fusion; library calls and
// reshapes stay outside; splat constants and broadcasts read by a pointwise
// op are cloned into its kernel (the broadcast's input is what it reads).

// CHECK-LABEL: func.func @bias_relu
// CHECK: %[[MM:.+]] = gpuc.matmul %arg0, %arg1
// CHECK: %[[BIAS:.+]] = gpuc.fusion(%[[MM]], %arg2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8xf32>):
// CHECK-NEXT: %[[BB:.+]] = gpuc.broadcast %[[B]] : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.+]] = gpuc.add %[[A]], %[[BB]]
// CHECK-NEXT: gpuc.yield %[[S]]
// CHECK-NOT: gpuc.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: %[[RELU:.+]] = gpuc.fusion(%[[BIAS]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK: gpuc.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: gpuc.max
// CHECK: %[[FLAT:.+]] = gpuc.reshape %[[RELU]]
// CHECK: %[[SUM:.+]] = gpuc.fusion(%[[FLAT]]) : (tensor<32xf32>) -> tensor<f32> {
// CHECK: gpuc.reduce_sum
// CHECK: return %[[SUM]]
func.func @bias_relu(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<f32> {
  %m = gpuc.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %s = gpuc.add %m, %bb : tensor<4x8xf32>
  %zero = gpuc.constant dense<0.0> : tensor<4x8xf32>
  %r = gpuc.max %s, %zero : tensor<4x8xf32>
  %flat = gpuc.reshape %r : tensor<4x8xf32> -> tensor<32xf32>
  %t = gpuc.reduce_sum %flat axes = [0] : tensor<32xf32> -> tensor<f32>
  return %t : tensor<f32>
}

// -----

// A broadcast read by a library call (or returned) is materialized by its
// own kernel; one read by nobody once its readers recompute it disappears.
// CHECK-LABEL: func.func @materialized
// CHECK: %[[B:.+]] = gpuc.fusion(%arg1) : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: gpuc.broadcast
// CHECK: gpuc.matmul %arg0, %[[B]] transpose_rhs
func.func @materialized(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x4xf32> {
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %m = gpuc.matmul %a, %bb transpose_rhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

// Ops already grouped by a fusion stay as they are.
// CHECK-LABEL: func.func @already_fused
// CHECK: gpuc.fusion(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.exp
// CHECK-NEXT: gpuc.neg
// CHECK-NEXT: gpuc.yield
// CHECK-NOT: gpuc.fusion
func.func @already_fused(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = gpuc.fusion(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = gpuc.exp %a : tensor<4xf32>
    %n = gpuc.neg %e : tensor<4xf32>
    gpuc.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// A widening cast (mixed precision) is recomputed by each kernel that reads
// it: the kernels read the f16 value, and no kernel writes an f32 copy.
// CHECK-LABEL: func.func @widening
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16>)
// CHECK-NOT: -> tensor<4xf32> {
// CHECK: gpuc.fusion(%[[X]]) : (tensor<4xf16>) -> tensor<4xf32>
// CHECK: gpuc.cast
// CHECK: gpuc.relu
// CHECK: gpuc.fusion(%[[X]]) : (tensor<4xf16>) -> tensor<f32>
// CHECK: gpuc.cast
// CHECK: gpuc.reduce_sum
func.func @widening(%x: tensor<4xf16>) -> (tensor<4xf32>, tensor<f32>) {
  %w = gpuc.cast %x : tensor<4xf16> to tensor<4xf32>
  %r = gpuc.relu %w : tensor<4xf32>
  %s = gpuc.reduce_sum %w axes = [0] : tensor<4xf32> -> tensor<f32>
  return %r, %s : tensor<4xf32>, tensor<f32>
}
