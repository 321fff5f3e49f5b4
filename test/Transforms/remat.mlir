// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-remat -split-input-file | FileCheck %s
// RUN: not gpuc-opt %s --gpuc-form-kernels --gpuc-remat=budget=192 -split-input-file 2>&1 | FileCheck %s --check-prefix=UNREACHABLE
// A budget below what any recomputation reaches is an error that states
// the lowest peak reached (the GEMM-and-budget path is tested on the MLP in
// Trainer/remat.test).
// UNREACHABLE: error: the memory budget of 192 bytes (0.00 MiB) cannot be met: recomputing forward values lowers the arena's peak from 320 to 320 bytes (0.00 MiB) at best; give a budget of at least 320 bytes, or a smaller --batch

// Without a budget, pointwise kernels are recomputed when that lowers the
// peak or, at the same peak, the bytes kept for backward: exp(dropout(x))
// is recomputed in backward, back to the step's arguments. The recomputed
// dropout reads the same RNG key, so it draws the same mask.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg0]]: tensor<64xf32>
// CHECK-SAME: %[[KEY:arg1]]: tensor<2xi64> {gpuc.rng}
// CHECK-SAME: gpuc.remat = {budget = 0 : i64, extra_flops = {{[0-9]+}} : i64, merged = 0 : i64, peak = 320 : i64, peak_before = 320 : i64, recomputed = 1 : i64, solver = "greedy"}
// CHECK: gpuc.dropout
// CHECK: gpuc.exp
// CHECK: gpuc.reduce_sum
// CHECK: %[[D:.+]] = gpuc.fusion(%[[X]], %[[KEY]]) {gpuc.recompute}
// CHECK: gpuc.dropout
// CHECK: %[[E:.+]] = gpuc.fusion(%[[D]]) {gpuc.recompute}
// CHECK: gpuc.exp
// CHECK: gpuc.fusion(%[[E]])
// CHECK: gpuc.mul
func.func @train_step(%x: tensor<64xf32> {gpuc.input = "x"}, %key: tensor<2xi64> {gpuc.rng}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<64xf32> {gpuc.output = "dx"}) {
  %d = gpuc.dropout %x, %key stream = 0 ratio = 0.5 : tensor<64xf32>
  %e = gpuc.exp %d : tensor<64xf32>
  %s = gpuc.reduce_sum %e axes = [0] : tensor<64xf32> -> tensor<f32>
  %l = gpuc.neg %s : tensor<f32>
  %g = gpuc.mul %e, %e : tensor<64xf32>
  return %l, %g : tensor<f32>, tensor<64xf32>
}

// -----

// A kernel result that backward reads only through a view made in forward
// (a reshape: GEMM operands are such views) is kept for backward all the
// same, and is recomputed like one read directly: the recomputation is
// viewed again before the backward kernel that reads it, and the forward
// view, read by nothing now, is gone.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg0]]: tensor<64xf32>
// CHECK-SAME: recomputed = 1 : i64
// CHECK: %[[E:.+]] = gpuc.fusion(%[[X]])
// CHECK: gpuc.exp
// CHECK-NOT: gpuc.reshape
// CHECK: gpuc.reduce_sum
// CHECK: %[[AGAIN:.+]] = gpuc.fusion(%[[X]]) {gpuc.recompute}
// CHECK: gpuc.exp
// CHECK: %[[VIEW:.+]] = gpuc.reshape %[[AGAIN]] {gpuc.recompute} : tensor<64xf32> -> tensor<8x8xf32>
// CHECK: gpuc.fusion(%[[VIEW]])
// CHECK: gpuc.mul
func.func @train_step(%x: tensor<64xf32> {gpuc.input = "x"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<8x8xf32> {gpuc.output = "dx"}) {
  %e = gpuc.exp %x : tensor<64xf32>
  %r = gpuc.reshape %e : tensor<64xf32> -> tensor<8x8xf32>
  %s = gpuc.reduce_sum %e axes = [0] : tensor<64xf32> -> tensor<f32>
  %l = gpuc.neg %s : tensor<f32>
  %g = gpuc.mul %r, %r : tensor<8x8xf32>
  return %l, %g : tensor<f32>, tensor<8x8xf32>
}
