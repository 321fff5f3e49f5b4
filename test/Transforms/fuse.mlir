// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-fuse -split-input-file | FileCheck %s
// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-fuse=memory-first -split-input-file | FileCheck %s --check-prefix=MEM

// A pointwise chain is one kernel.
// CHECK-LABEL: func.func @chain
// CHECK: gpuc.fusion(%arg0, %arg1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.add
// CHECK-NEXT: gpuc.exp
// CHECK-NEXT: gpuc.tanh
// CHECK-NEXT: gpuc.yield
// CHECK-NOT: gpuc.fusion
func.func @chain(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = gpuc.add %x, %y : tensor<4x8xf32>
  %e = gpuc.exp %a : tensor<4x8xf32>
  %t = gpuc.tanh %e : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// Decomposed softmax: two reductions over the same rows and their pointwise
// producers and consumers are one row kernel.
// CHECK-LABEL: func.func @softmax
// CHECK: gpuc.fusion(%arg0) : (tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK: gpuc.reduce_max
// CHECK: gpuc.exp
// CHECK: gpuc.reduce_sum
// CHECK: gpuc.div
// CHECK-NOT: gpuc.fusion
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %m = gpuc.reduce_max %x axes = [1] keep_dims : tensor<4x10xf32> -> tensor<4x1xf32>
  %mb = gpuc.broadcast %m : tensor<4x1xf32> -> tensor<4x10xf32>
  %s = gpuc.sub %x, %mb : tensor<4x10xf32>
  %e = gpuc.exp %s : tensor<4x10xf32>
  %z = gpuc.reduce_sum %e axes = [1] keep_dims : tensor<4x10xf32> -> tensor<4x1xf32>
  %zb = gpuc.broadcast %z : tensor<4x1xf32> -> tensor<4x10xf32>
  %p = gpuc.div %e, %zb : tensor<4x10xf32>
  return %p : tensor<4x10xf32>
}

// -----

// LayerNorm as PyTorch exports it (ReduceMean, Sub, Pow, ReduceMean, Add,
// Sqrt, Div, Mul, Add) is one kernel, found by structure, not by name.
// CHECK-LABEL: func.func @layer_norm_as_exported
// CHECK: gpuc.fusion(%arg0, %arg1, %arg2)
// CHECK: gpuc.reduce_mean
// CHECK: gpuc.pow
// CHECK: gpuc.reduce_mean
// CHECK: gpuc.sqrt
// CHECK: gpuc.div
// CHECK: gpuc.add
// CHECK-NOT: gpuc.fusion
func.func @layer_norm_as_exported(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %mean = gpuc.reduce_mean %x axes = [1] keep_dims : tensor<4x16xf32> -> tensor<4x1xf32>
  %mb = gpuc.broadcast %mean : tensor<4x1xf32> -> tensor<4x16xf32>
  %d = gpuc.sub %x, %mb : tensor<4x16xf32>
  %two = gpuc.constant dense<2.0> : tensor<4x16xf32>
  %sq = gpuc.pow %d, %two : tensor<4x16xf32>
  %var = gpuc.reduce_mean %sq axes = [1] keep_dims : tensor<4x16xf32> -> tensor<4x1xf32>
  %eps = gpuc.constant dense<1.0e-05> : tensor<4x1xf32>
  %ve = gpuc.add %var, %eps : tensor<4x1xf32>
  %std = gpuc.sqrt %ve : tensor<4x1xf32>
  %sb = gpuc.broadcast %std : tensor<4x1xf32> -> tensor<4x16xf32>
  %n = gpuc.div %d, %sb : tensor<4x16xf32>
  %gb = gpuc.broadcast %g : tensor<16xf32> -> tensor<4x16xf32>
  %bb = gpuc.broadcast %b : tensor<16xf32> -> tensor<4x16xf32>
  %y = gpuc.mul %n, %gb : tensor<4x16xf32>
  %r = gpuc.add %y, %bb : tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// Horizontal: two kernels reading the same input become one with two results.
// CHECK-LABEL: func.func @siblings
// CHECK: %[[K:.+]]:2 = gpuc.fusion(%arg0)
// CHECK: gpuc.exp
// CHECK: gpuc.neg
// CHECK: return %[[K]]#0, %[[K]]#1
func.func @siblings(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %e = gpuc.exp %x : tensor<64xf32>
  %n = gpuc.neg %x : tensor<64xf32>
  return %e, %n : tensor<64xf32>, tensor<64xf32>
}

// -----

// The bias and activation after a GEMM are one epilogue kernel.
// CHECK-LABEL: func.func @bias_relu_epilogue
// CHECK: %[[M:.+]] = gpuc.matmul
// CHECK: gpuc.fusion(%[[M]], %arg2)
// CHECK: gpuc.add
// CHECK-NEXT: gpuc.relu
// CHECK-NOT: gpuc.fusion
func.func @bias_relu_epilogue(%a: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %m = gpuc.matmul %a, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %bb = gpuc.broadcast %b : tensor<16xf32> -> tensor<4x16xf32>
  %s = gpuc.add %m, %bb : tensor<4x16xf32>
  %r = gpuc.relu %s : tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// A producer read after its consumer stays a result of the merged kernel
// instead of being recomputed.
// CHECK-LABEL: func.func @multi_output
// CHECK: %[[K:.+]]:2 = gpuc.fusion(%arg0)
// CHECK: %[[E:.+]] = gpuc.exp
// CHECK: %[[N:.+]] = gpuc.neg %[[E]]
// CHECK: gpuc.yield %[[N]], %[[E]]
// CHECK: return %[[K]]#1, %[[K]]#0
func.func @multi_output(%x: tensor<32xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %e = gpuc.exp %x : tensor<32xf32>
  %n = gpuc.neg %e : tensor<32xf32>
  return %e, %n : tensor<32xf32>, tensor<32xf32>
}

// -----

// Must not fuse: overlapping windows (3x3, stride 2) would recompute exp up
// to four times per input element.
// CHECK-LABEL: func.func @no_window_recompute
// CHECK: %[[E:.+]] = gpuc.fusion(%arg0)
// CHECK: gpuc.exp
// CHECK: gpuc.fusion(%[[E]])
// CHECK: gpuc.max_pool2d
func.func @no_window_recompute(%x: tensor<1x2x9x9xf32>) -> tensor<1x2x4x4xf32> {
  %e = gpuc.exp %x : tensor<1x2x9x9xf32>
  %p = gpuc.max_pool2d %e kernel = [3, 3] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<1x2x9x9xf32> -> tensor<1x2x4x4xf32>
  return %p : tensor<1x2x4x4xf32>
}

// -----

// Windows that do not overlap read each input element once: memory-first,
// the pooling and its argmax compute exp where they read it, and the 8x8
// tensor is never stored. By default exp is stored (recomputing it costs
// the CPU more than the bytes); the pooling and its argmax, siblings
// reading one tensor, are one kernel either way.
// CHECK-LABEL: func.func @window_tiles_recompute
// CHECK: %[[E:.+]] = gpuc.fusion(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.exp
// CHECK: %[[K:.+]]:2 = gpuc.fusion(%[[E]])
// CHECK-DAG: gpuc.max_pool2d
// CHECK-DAG: gpuc.max_pool2d_argmax
// MEM-LABEL: func.func @window_tiles_recompute
// MEM: %[[K:.+]]:2 = gpuc.fusion(%arg0)
// MEM-DAG: gpuc.exp
// MEM-DAG: gpuc.max_pool2d
// MEM-DAG: gpuc.max_pool2d_argmax
// MEM: return %[[K]]#{{[01]}}, %[[K]]#{{[01]}}
func.func @window_tiles_recompute(%x: tensor<1x2x8x8xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xi8>) {
  %e = gpuc.exp %x : tensor<1x2x8x8xf32>
  %p = gpuc.max_pool2d %e kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
  %i = gpuc.max_pool2d_argmax %e kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xi8>
  return %p, %i : tensor<1x2x4x4xf32>, tensor<1x2x4x4xi8>
}

// -----

// Max pooling's gradient routed by stored indices is two loads: memory-
// first, it joins the row kernel that reduces it per channel (batch norm's
// backward), so the full-size gradient is never stored. By default it is
// stored once (the row kernel's passes would each redo it).
// CHECK-LABEL: func.func @pool_gradient_in_row_kernel
// CHECK: %[[G:.+]] = gpuc.fusion(%arg0, %arg1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.max_pool2d_backward
// CHECK-NOT: reduce_sum
// CHECK: gpuc.fusion(%[[G]], %arg2)
// CHECK: gpuc.reduce_sum
// MEM-LABEL: func.func @pool_gradient_in_row_kernel
// MEM: %[[K:.+]]:2 = gpuc.fusion(%arg0, %arg1, %arg2)
// MEM: gpuc.max_pool2d_backward
// MEM: gpuc.reduce_sum
func.func @pool_gradient_in_row_kernel(%i: tensor<2x3x4x4xi8>, %dy: tensor<2x3x4x4xf32>, %x: tensor<2x3x8x8xf32>) -> (tensor<3xf32>, tensor<2x3x8x8xf32>) {
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x4x4xi8>, tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  %m = gpuc.mul %g, %x : tensor<2x3x8x8xf32>
  %s = gpuc.reduce_sum %m axes = [0, 2, 3] : tensor<2x3x8x8xf32> -> tensor<3xf32>
  %sb = gpuc.reshape %s : tensor<3xf32> -> tensor<1x3x1x1xf32>
  %b = gpuc.broadcast %sb : tensor<1x3x1x1xf32> -> tensor<2x3x8x8xf32>
  %o = gpuc.mul %g, %b : tensor<2x3x8x8xf32>
  return %s, %o : tensor<3xf32>, tensor<2x3x8x8xf32>
}

// -----

// Max pooling's gradient reads an output gradient computed in a few cheap
// ops (the sum of two gradients, masked by the pooled value) at each window
// it routes: one kernel. An exponential on the way is not cheap: it stays a
// kernel of its own.
// CHECK-LABEL: func.func @pool_gradient_of_masked_sum
// CHECK: gpuc.fusion(%arg1, %arg2, %arg3, %arg0)
// CHECK: gpuc.compare
// CHECK: gpuc.select
// CHECK: gpuc.max_pool2d_backward
// CHECK-NOT: gpuc.fusion
// CHECK: return
// CHECK-LABEL: func.func @pool_gradient_of_exp
// CHECK: %[[E:.+]] = gpuc.fusion(%arg1)
// CHECK: gpuc.exp
// CHECK: gpuc.fusion(%arg0, %[[E]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.max_pool2d_backward
func.func @pool_gradient_of_masked_sum(%i: tensor<2x5x5x3xi8>, %a: tensor<2x5x5x3xf32>, %b: tensor<2x5x5x3xf32>, %p: tensor<2x5x5x3xf32>) -> tensor<2x9x9x3xf32> {
  %sum = gpuc.add %a, %b : tensor<2x5x5x3xf32>
  %zero = gpuc.constant dense<0.0> : tensor<2x5x5x3xf32>
  %kept = gpuc.compare gt, %p, %zero : tensor<2x5x5x3xf32>
  %dy = gpuc.select %kept, %sum, %zero : tensor<2x5x5x3xi1>, tensor<2x5x5x3xf32>
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x5x5x3xi8>, tensor<2x5x5x3xf32> -> tensor<2x9x9x3xf32>
  return %g : tensor<2x9x9x3xf32>
}
func.func @pool_gradient_of_exp(%i: tensor<2x5x5x3xi8>, %a: tensor<2x5x5x3xf32>) -> tensor<2x9x9x3xf32> {
  %dy = gpuc.exp %a : tensor<2x5x5x3xf32>
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x5x5x3xi8>, tensor<2x5x5x3xf32> -> tensor<2x9x9x3xf32>
  return %g : tensor<2x9x9x3xf32>
}

// -----

// Must not fuse: the second reduction needs every row of the first, a
// grid-wide barrier inside one kernel.
// CHECK-LABEL: func.func @no_grid_barrier
// CHECK: %[[R:.+]] = gpuc.fusion(%arg0)
// CHECK: gpuc.reduce_sum {{.*}} axes = [1]
// CHECK: gpuc.fusion(%[[R]])
// CHECK: gpuc.reduce_sum {{.*}} axes = [0]
func.func @no_grid_barrier(%x: tensor<4x8xf32>) -> tensor<f32> {
  %r = gpuc.reduce_sum %x axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %t = gpuc.reduce_sum %r axes = [0] : tensor<4xf32> -> tensor<f32>
  return %t : tensor<f32>
}

// -----

// Must not fuse: exp feeds the GEMM that the consumer also reads, so the
// merged kernel (at the consumer) would run after its own reader.
// CHECK-LABEL: func.func @no_broken_dependency
// CHECK: %[[E:.+]] = gpuc.fusion(%arg0)
// CHECK: %[[M:.+]] = gpuc.matmul %[[E]], %arg1
// CHECK: gpuc.fusion(%[[E]], %[[M]])
func.func @no_broken_dependency(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %e = gpuc.exp %x : tensor<4x8xf32>
  %m = gpuc.matmul %e, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = gpuc.add %e, %m : tensor<4x8xf32>
  %t = gpuc.tanh %s : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// Must not fuse: the broadcast would recompute exp 64 times per element.
// CHECK-LABEL: func.func @no_expanding_recompute
// CHECK: %[[E:.+]] = gpuc.fusion(%arg1)
// CHECK: gpuc.exp
// CHECK: gpuc.fusion(%arg0, %[[E]])
func.func @no_expanding_recompute(%x: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<64x32xf32> {
  %e = gpuc.exp %b : tensor<32xf32>
  %eb = gpuc.broadcast %e : tensor<32xf32> -> tensor<64x32xf32>
  %s = gpuc.add %x, %eb : tensor<64x32xf32>
  return %s : tensor<64x32xf32>
}

// -----

// Multi-tensor: the updates of differently sized parameters, which only the
// step returns, are one kernel (a grid segment per size).
// CHECK-LABEL: func.func @multi_tensor_update
// CHECK: %[[K:.+]]:2 = gpuc.fusion(%arg1, %arg0, %arg3, %arg2) : (tensor<8xf32>, tensor<8xf32>, tensor<4x3xf32>, tensor<4x3xf32>) -> (tensor<8xf32>, tensor<4x3xf32>)
// CHECK: return %[[K]]#0, %[[K]]#1
func.func @multi_tensor_update(%w: tensor<8xf32>, %gw: tensor<8xf32>, %v: tensor<4x3xf32>, %gv: tensor<4x3xf32>) -> (tensor<8xf32>, tensor<4x3xf32>) {
  %lr = gpuc.constant dense<0.1> : tensor<8xf32>
  %sw = gpuc.mul %gw, %lr : tensor<8xf32>
  %w2 = gpuc.sub %w, %sw : tensor<8xf32>
  %lr2 = gpuc.constant dense<0.1> : tensor<4x3xf32>
  %sv = gpuc.mul %gv, %lr2 : tensor<4x3xf32>
  %v2 = gpuc.sub %v, %sv : tensor<4x3xf32>
  return %w2, %v2 : tensor<8xf32>, tensor<4x3xf32>
}

// -----

// An update that addresses memory by integers it loads (a tied embedding's,
// summing each row's positions) stays a kernel of its own: the GPU runs a
// kernel at the registers of its hungriest segment, and such a kernel has
// no alternatives timed at load. The other updates still merge.
// CHECK-LABEL: func.func @multi_tensor_beside_segment_sum
// CHECK: %[[E:.+]] = gpuc.fusion(%arg3, %arg4, %arg5, %arg2)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.segment_sum
// CHECK: %[[K:.+]]:2 = gpuc.fusion(%arg1, %arg0, %arg7, %arg6)
// CHECK-NOT: gpuc.segment_sum
// CHECK: return %[[K]]#0, %[[E]], %[[K]]#1
func.func @multi_tensor_beside_segment_sum(%w: tensor<8xf32>, %gw: tensor<8xf32>, %e: tensor<10x4xf32>, %u: tensor<6x4xf32>, %o: tensor<11xi32>, %p: tensor<6xi32>, %v: tensor<4x3xf32>, %gv: tensor<4x3xf32>) -> (tensor<8xf32>, tensor<10x4xf32>, tensor<4x3xf32>) {
  %lr = gpuc.constant dense<0.1> : tensor<8xf32>
  %sw = gpuc.mul %gw, %lr : tensor<8xf32>
  %w2 = gpuc.sub %w, %sw : tensor<8xf32>
  %g = gpuc.segment_sum %u, %o, %p axis = 0 : (tensor<6x4xf32>, tensor<11xi32>, tensor<6xi32>) -> tensor<10x4xf32>
  %lr1 = gpuc.constant dense<0.1> : tensor<10x4xf32>
  %se = gpuc.mul %g, %lr1 : tensor<10x4xf32>
  %e2 = gpuc.sub %e, %se : tensor<10x4xf32>
  %lr2 = gpuc.constant dense<0.1> : tensor<4x3xf32>
  %sv = gpuc.mul %gv, %lr2 : tensor<4x3xf32>
  %v2 = gpuc.sub %v, %sv : tensor<4x3xf32>
  return %w2, %e2, %v2 : tensor<8xf32>, tensor<10x4xf32>, tensor<4x3xf32>
}

// -----

// A kernel of parameter updates has at most 64 results (Fuse.cpp's
// kMaxUpdateResults): 65 parameters' updates are two kernels.
// CHECK-LABEL: func.func @multi_tensor_chunks
// CHECK: %[[FIRST:.+]]:64 = gpuc.fusion(
// CHECK: %[[LAST:.+]] = gpuc.fusion(
// CHECK-NOT: gpuc.fusion
// CHECK: return %[[FIRST]]#0, {{.*}}, %[[FIRST]]#63, %[[LAST]] :
func.func @multi_tensor_chunks(%w0: tensor<4xf32>, %g0: tensor<4xf32>, %w1: tensor<4xf32>, %g1: tensor<4xf32>, %w2: tensor<4xf32>, %g2: tensor<4xf32>, %w3: tensor<4xf32>, %g3: tensor<4xf32>, %w4: tensor<4xf32>, %g4: tensor<4xf32>, %w5: tensor<4xf32>, %g5: tensor<4xf32>, %w6: tensor<4xf32>, %g6: tensor<4xf32>, %w7: tensor<4xf32>, %g7: tensor<4xf32>, %w8: tensor<4xf32>, %g8: tensor<4xf32>, %w9: tensor<4xf32>, %g9: tensor<4xf32>, %w10: tensor<4xf32>, %g10: tensor<4xf32>, %w11: tensor<4xf32>, %g11: tensor<4xf32>, %w12: tensor<4xf32>, %g12: tensor<4xf32>, %w13: tensor<4xf32>, %g13: tensor<4xf32>, %w14: tensor<4xf32>, %g14: tensor<4xf32>, %w15: tensor<4xf32>, %g15: tensor<4xf32>, %w16: tensor<4xf32>, %g16: tensor<4xf32>, %w17: tensor<4xf32>, %g17: tensor<4xf32>, %w18: tensor<4xf32>, %g18: tensor<4xf32>, %w19: tensor<4xf32>, %g19: tensor<4xf32>, %w20: tensor<4xf32>, %g20: tensor<4xf32>, %w21: tensor<4xf32>, %g21: tensor<4xf32>, %w22: tensor<4xf32>, %g22: tensor<4xf32>, %w23: tensor<4xf32>, %g23: tensor<4xf32>, %w24: tensor<4xf32>, %g24: tensor<4xf32>, %w25: tensor<4xf32>, %g25: tensor<4xf32>, %w26: tensor<4xf32>, %g26: tensor<4xf32>, %w27: tensor<4xf32>, %g27: tensor<4xf32>, %w28: tensor<4xf32>, %g28: tensor<4xf32>, %w29: tensor<4xf32>, %g29: tensor<4xf32>, %w30: tensor<4xf32>, %g30: tensor<4xf32>, %w31: tensor<4xf32>, %g31: tensor<4xf32>, %w32: tensor<4xf32>, %g32: tensor<4xf32>, %w33: tensor<4xf32>, %g33: tensor<4xf32>, %w34: tensor<4xf32>, %g34: tensor<4xf32>, %w35: tensor<4xf32>, %g35: tensor<4xf32>, %w36: tensor<4xf32>, %g36: tensor<4xf32>, %w37: tensor<4xf32>, %g37: tensor<4xf32>, %w38: tensor<4xf32>, %g38: tensor<4xf32>, %w39: tensor<4xf32>, %g39: tensor<4xf32>, %w40: tensor<4xf32>, %g40: tensor<4xf32>, %w41: tensor<4xf32>, %g41: tensor<4xf32>, %w42: tensor<4xf32>, %g42: tensor<4xf32>, %w43: tensor<4xf32>, %g43: tensor<4xf32>, %w44: tensor<4xf32>, %g44: tensor<4xf32>, %w45: tensor<4xf32>, %g45: tensor<4xf32>, %w46: tensor<4xf32>, %g46: tensor<4xf32>, %w47: tensor<4xf32>, %g47: tensor<4xf32>, %w48: tensor<4xf32>, %g48: tensor<4xf32>, %w49: tensor<4xf32>, %g49: tensor<4xf32>, %w50: tensor<4xf32>, %g50: tensor<4xf32>, %w51: tensor<4xf32>, %g51: tensor<4xf32>, %w52: tensor<4xf32>, %g52: tensor<4xf32>, %w53: tensor<4xf32>, %g53: tensor<4xf32>, %w54: tensor<4xf32>, %g54: tensor<4xf32>, %w55: tensor<4xf32>, %g55: tensor<4xf32>, %w56: tensor<4xf32>, %g56: tensor<4xf32>, %w57: tensor<4xf32>, %g57: tensor<4xf32>, %w58: tensor<4xf32>, %g58: tensor<4xf32>, %w59: tensor<4xf32>, %g59: tensor<4xf32>, %w60: tensor<4xf32>, %g60: tensor<4xf32>, %w61: tensor<4xf32>, %g61: tensor<4xf32>, %w62: tensor<4xf32>, %g62: tensor<4xf32>, %w63: tensor<4xf32>, %g63: tensor<4xf32>, %w64: tensor<4xf32>, %g64: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %lr = gpuc.constant dense<0.1> : tensor<4xf32>
  %s0 = gpuc.mul %g0, %lr : tensor<4xf32>
  %u0 = gpuc.sub %w0, %s0 : tensor<4xf32>
  %s1 = gpuc.mul %g1, %lr : tensor<4xf32>
  %u1 = gpuc.sub %w1, %s1 : tensor<4xf32>
  %s2 = gpuc.mul %g2, %lr : tensor<4xf32>
  %u2 = gpuc.sub %w2, %s2 : tensor<4xf32>
  %s3 = gpuc.mul %g3, %lr : tensor<4xf32>
  %u3 = gpuc.sub %w3, %s3 : tensor<4xf32>
  %s4 = gpuc.mul %g4, %lr : tensor<4xf32>
  %u4 = gpuc.sub %w4, %s4 : tensor<4xf32>
  %s5 = gpuc.mul %g5, %lr : tensor<4xf32>
  %u5 = gpuc.sub %w5, %s5 : tensor<4xf32>
  %s6 = gpuc.mul %g6, %lr : tensor<4xf32>
  %u6 = gpuc.sub %w6, %s6 : tensor<4xf32>
  %s7 = gpuc.mul %g7, %lr : tensor<4xf32>
  %u7 = gpuc.sub %w7, %s7 : tensor<4xf32>
  %s8 = gpuc.mul %g8, %lr : tensor<4xf32>
  %u8 = gpuc.sub %w8, %s8 : tensor<4xf32>
  %s9 = gpuc.mul %g9, %lr : tensor<4xf32>
  %u9 = gpuc.sub %w9, %s9 : tensor<4xf32>
  %s10 = gpuc.mul %g10, %lr : tensor<4xf32>
  %u10 = gpuc.sub %w10, %s10 : tensor<4xf32>
  %s11 = gpuc.mul %g11, %lr : tensor<4xf32>
  %u11 = gpuc.sub %w11, %s11 : tensor<4xf32>
  %s12 = gpuc.mul %g12, %lr : tensor<4xf32>
  %u12 = gpuc.sub %w12, %s12 : tensor<4xf32>
  %s13 = gpuc.mul %g13, %lr : tensor<4xf32>
  %u13 = gpuc.sub %w13, %s13 : tensor<4xf32>
  %s14 = gpuc.mul %g14, %lr : tensor<4xf32>
  %u14 = gpuc.sub %w14, %s14 : tensor<4xf32>
  %s15 = gpuc.mul %g15, %lr : tensor<4xf32>
  %u15 = gpuc.sub %w15, %s15 : tensor<4xf32>
  %s16 = gpuc.mul %g16, %lr : tensor<4xf32>
  %u16 = gpuc.sub %w16, %s16 : tensor<4xf32>
  %s17 = gpuc.mul %g17, %lr : tensor<4xf32>
  %u17 = gpuc.sub %w17, %s17 : tensor<4xf32>
  %s18 = gpuc.mul %g18, %lr : tensor<4xf32>
  %u18 = gpuc.sub %w18, %s18 : tensor<4xf32>
  %s19 = gpuc.mul %g19, %lr : tensor<4xf32>
  %u19 = gpuc.sub %w19, %s19 : tensor<4xf32>
  %s20 = gpuc.mul %g20, %lr : tensor<4xf32>
  %u20 = gpuc.sub %w20, %s20 : tensor<4xf32>
  %s21 = gpuc.mul %g21, %lr : tensor<4xf32>
  %u21 = gpuc.sub %w21, %s21 : tensor<4xf32>
  %s22 = gpuc.mul %g22, %lr : tensor<4xf32>
  %u22 = gpuc.sub %w22, %s22 : tensor<4xf32>
  %s23 = gpuc.mul %g23, %lr : tensor<4xf32>
  %u23 = gpuc.sub %w23, %s23 : tensor<4xf32>
  %s24 = gpuc.mul %g24, %lr : tensor<4xf32>
  %u24 = gpuc.sub %w24, %s24 : tensor<4xf32>
  %s25 = gpuc.mul %g25, %lr : tensor<4xf32>
  %u25 = gpuc.sub %w25, %s25 : tensor<4xf32>
  %s26 = gpuc.mul %g26, %lr : tensor<4xf32>
  %u26 = gpuc.sub %w26, %s26 : tensor<4xf32>
  %s27 = gpuc.mul %g27, %lr : tensor<4xf32>
  %u27 = gpuc.sub %w27, %s27 : tensor<4xf32>
  %s28 = gpuc.mul %g28, %lr : tensor<4xf32>
  %u28 = gpuc.sub %w28, %s28 : tensor<4xf32>
  %s29 = gpuc.mul %g29, %lr : tensor<4xf32>
  %u29 = gpuc.sub %w29, %s29 : tensor<4xf32>
  %s30 = gpuc.mul %g30, %lr : tensor<4xf32>
  %u30 = gpuc.sub %w30, %s30 : tensor<4xf32>
  %s31 = gpuc.mul %g31, %lr : tensor<4xf32>
  %u31 = gpuc.sub %w31, %s31 : tensor<4xf32>
  %s32 = gpuc.mul %g32, %lr : tensor<4xf32>
  %u32 = gpuc.sub %w32, %s32 : tensor<4xf32>
  %s33 = gpuc.mul %g33, %lr : tensor<4xf32>
  %u33 = gpuc.sub %w33, %s33 : tensor<4xf32>
  %s34 = gpuc.mul %g34, %lr : tensor<4xf32>
  %u34 = gpuc.sub %w34, %s34 : tensor<4xf32>
  %s35 = gpuc.mul %g35, %lr : tensor<4xf32>
  %u35 = gpuc.sub %w35, %s35 : tensor<4xf32>
  %s36 = gpuc.mul %g36, %lr : tensor<4xf32>
  %u36 = gpuc.sub %w36, %s36 : tensor<4xf32>
  %s37 = gpuc.mul %g37, %lr : tensor<4xf32>
  %u37 = gpuc.sub %w37, %s37 : tensor<4xf32>
  %s38 = gpuc.mul %g38, %lr : tensor<4xf32>
  %u38 = gpuc.sub %w38, %s38 : tensor<4xf32>
  %s39 = gpuc.mul %g39, %lr : tensor<4xf32>
  %u39 = gpuc.sub %w39, %s39 : tensor<4xf32>
  %s40 = gpuc.mul %g40, %lr : tensor<4xf32>
  %u40 = gpuc.sub %w40, %s40 : tensor<4xf32>
  %s41 = gpuc.mul %g41, %lr : tensor<4xf32>
  %u41 = gpuc.sub %w41, %s41 : tensor<4xf32>
  %s42 = gpuc.mul %g42, %lr : tensor<4xf32>
  %u42 = gpuc.sub %w42, %s42 : tensor<4xf32>
  %s43 = gpuc.mul %g43, %lr : tensor<4xf32>
  %u43 = gpuc.sub %w43, %s43 : tensor<4xf32>
  %s44 = gpuc.mul %g44, %lr : tensor<4xf32>
  %u44 = gpuc.sub %w44, %s44 : tensor<4xf32>
  %s45 = gpuc.mul %g45, %lr : tensor<4xf32>
  %u45 = gpuc.sub %w45, %s45 : tensor<4xf32>
  %s46 = gpuc.mul %g46, %lr : tensor<4xf32>
  %u46 = gpuc.sub %w46, %s46 : tensor<4xf32>
  %s47 = gpuc.mul %g47, %lr : tensor<4xf32>
  %u47 = gpuc.sub %w47, %s47 : tensor<4xf32>
  %s48 = gpuc.mul %g48, %lr : tensor<4xf32>
  %u48 = gpuc.sub %w48, %s48 : tensor<4xf32>
  %s49 = gpuc.mul %g49, %lr : tensor<4xf32>
  %u49 = gpuc.sub %w49, %s49 : tensor<4xf32>
  %s50 = gpuc.mul %g50, %lr : tensor<4xf32>
  %u50 = gpuc.sub %w50, %s50 : tensor<4xf32>
  %s51 = gpuc.mul %g51, %lr : tensor<4xf32>
  %u51 = gpuc.sub %w51, %s51 : tensor<4xf32>
  %s52 = gpuc.mul %g52, %lr : tensor<4xf32>
  %u52 = gpuc.sub %w52, %s52 : tensor<4xf32>
  %s53 = gpuc.mul %g53, %lr : tensor<4xf32>
  %u53 = gpuc.sub %w53, %s53 : tensor<4xf32>
  %s54 = gpuc.mul %g54, %lr : tensor<4xf32>
  %u54 = gpuc.sub %w54, %s54 : tensor<4xf32>
  %s55 = gpuc.mul %g55, %lr : tensor<4xf32>
  %u55 = gpuc.sub %w55, %s55 : tensor<4xf32>
  %s56 = gpuc.mul %g56, %lr : tensor<4xf32>
  %u56 = gpuc.sub %w56, %s56 : tensor<4xf32>
  %s57 = gpuc.mul %g57, %lr : tensor<4xf32>
  %u57 = gpuc.sub %w57, %s57 : tensor<4xf32>
  %s58 = gpuc.mul %g58, %lr : tensor<4xf32>
  %u58 = gpuc.sub %w58, %s58 : tensor<4xf32>
  %s59 = gpuc.mul %g59, %lr : tensor<4xf32>
  %u59 = gpuc.sub %w59, %s59 : tensor<4xf32>
  %s60 = gpuc.mul %g60, %lr : tensor<4xf32>
  %u60 = gpuc.sub %w60, %s60 : tensor<4xf32>
  %s61 = gpuc.mul %g61, %lr : tensor<4xf32>
  %u61 = gpuc.sub %w61, %s61 : tensor<4xf32>
  %s62 = gpuc.mul %g62, %lr : tensor<4xf32>
  %u62 = gpuc.sub %w62, %s62 : tensor<4xf32>
  %s63 = gpuc.mul %g63, %lr : tensor<4xf32>
  %u63 = gpuc.sub %w63, %s63 : tensor<4xf32>
  %s64 = gpuc.mul %g64, %lr : tensor<4xf32>
  %u64 = gpuc.sub %w64, %s64 : tensor<4xf32>
  return %u0, %u1, %u2, %u3, %u4, %u5, %u6, %u7, %u8, %u9, %u10, %u11, %u12, %u13, %u14, %u15, %u16, %u17, %u18, %u19, %u20, %u21, %u22, %u23, %u24, %u25, %u26, %u27, %u28, %u29, %u30, %u31, %u32, %u33, %u34, %u35, %u36, %u37, %u38, %u39, %u40, %u41, %u42, %u43, %u44, %u45, %u46, %u47, %u48, %u49, %u50, %u51, %u52, %u53, %u54, %u55, %u56, %u57, %u58, %u59, %u60, %u61, %u62, %u63, %u64 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A cheap pointwise result is recomputed in the kernel that reads it beside
// the operand it is computed from, instead of being stored (batch norm's
// scaled output gradient): exp's kernel keeps one result and drops the
// scale, which its reader now takes.
// CHECK-LABEL: func.func @sink_cheap_result
// CHECK: %[[E:.+]] = gpuc.fusion(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.exp
// CHECK-NEXT: gpuc.yield
// CHECK: %[[M:.+]] = gpuc.matmul %[[E]], %arg1
// CHECK: gpuc.fusion(%[[M]], %[[E]], %arg2)
// CHECK: gpuc.broadcast
// CHECK: gpuc.mul
// CHECK: gpuc.mul
// CHECK: gpuc.add
func.func @sink_cheap_result(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>, %s: tensor<8xf32>) -> tensor<4x8xf32> {
  %d = gpuc.exp %a : tensor<4x8xf32>
  %sb = gpuc.broadcast %s : tensor<8xf32> -> tensor<4x8xf32>
  %e = gpuc.mul %d, %sb : tensor<4x8xf32>
  %m = gpuc.matmul %d, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %p = gpuc.mul %e, %m : tensor<4x8xf32>
  %r = gpuc.add %p, %d : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A new operand of the result's size is fine when it is live where the
// result is made: here the exp the GEMM reads, which then lives on to the
// reader in place of the product (no point of the step holds more bytes),
// and the first kernel stores one tensor instead of two.
// CHECK-LABEL: func.func @sink_same_size_operand
// CHECK: %[[E:.+]] = gpuc.fusion(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[M:.+]] = gpuc.matmul %[[E]], %arg1
// CHECK: gpuc.fusion(%[[M]], %arg2, %[[E]])
func.func @sink_same_size_operand(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>, %s: tensor<8xf32>) -> tensor<4x8xf32> {
  %d = gpuc.exp %a : tensor<4x8xf32>
  %sb = gpuc.broadcast %s : tensor<8xf32> -> tensor<4x8xf32>
  %e = gpuc.mul %d, %sb : tensor<4x8xf32>
  %m = gpuc.matmul %d, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %p = gpuc.mul %e, %m : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// Not when the reader would read more new bytes than the result holds:
// the product of two stored f32 tensors stays stored.
// CHECK-LABEL: func.func @no_sink_more_bytes
// CHECK: %[[E:.+]]:2 = gpuc.fusion(%arg0, %arg2)
// CHECK: gpuc.fusion(%[[E]]#0, %{{.+}})
func.func @no_sink_more_bytes(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>, %s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %d = gpuc.exp %a : tensor<4x8xf32>
  %e = gpuc.mul %d, %s : tensor<4x8xf32>
  %m = gpuc.matmul %d, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %p = gpuc.mul %e, %m : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// A new operand is fine when it is narrower in bytes than the result: the
// f32 ReLU (4x8xf32) that the reader after the GEMM needs is recomputed
// there from the 16-bit input (4x8xf16) and the bias, so only its 16-bit
// rounding, which the GEMM reads, is stored (mixed precision keeps 16 bits
// for backward this way).
// CHECK-LABEL: func.func @sink_narrower_operand
// CHECK: %[[L:.+]] = gpuc.fusion(%arg0, %arg2) : (tensor<4x8xf16>, tensor<8xf32>) -> tensor<4x8xf16>
// CHECK: %[[M:.+]] = gpuc.matmul %[[L]], %arg1
// CHECK: gpuc.fusion(%[[M]], %arg2, %arg0) : (tensor<4x8xf16>, tensor<8xf32>, tensor<4x8xf16>) -> tensor<4x8xf32>
// CHECK: gpuc.relu
// CHECK: gpuc.mul
func.func @sink_narrower_operand(%h: tensor<4x8xf16>, %w: tensor<8x8xf16>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %x = gpuc.cast %h : tensor<4x8xf16> to tensor<4x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %y = gpuc.add %x, %bb : tensor<4x8xf32>
  %r = gpuc.relu %y : tensor<4x8xf32>
  %rl = gpuc.cast %r : tensor<4x8xf32> to tensor<4x8xf16>
  %m = gpuc.matmul %rl, %w : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
  %mf = gpuc.cast %m : tensor<4x8xf16> to tensor<4x8xf32>
  %p = gpuc.mul %mf, %r : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// A per-row statistic the recomputation needs is yielded: the centred
// value (4x8xf32) is recomputed after the GEMM from the 16-bit input and
// the row means (4x1xf32), which the first kernel now yields instead
// (batch norm's normalized input under mixed precision).
// CHECK-LABEL: func.func @sink_exposes_statistic
// CHECK: %[[S:.+]]:2 = gpuc.fusion(%arg0) : (tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x1xf32>)
// CHECK: %[[MEAN:.+]] = gpuc.reduce_mean
// CHECK: gpuc.yield %{{.+}}, %[[MEAN]]
// CHECK: %[[G:.+]] = gpuc.matmul %[[S]]#0, %arg1
// CHECK: gpuc.fusion(%[[G]], %[[S]]#1, %arg0) : (tensor<4x8xf16>, tensor<4x1xf32>, tensor<4x8xf16>) -> tensor<4x8xf32>
// CHECK: gpuc.sub
// CHECK: gpuc.mul
func.func @sink_exposes_statistic(%h: tensor<4x8xf16>, %w: tensor<8x8xf16>) -> tensor<4x8xf32> {
  %x = gpuc.cast %h : tensor<4x8xf16> to tensor<4x8xf32>
  %m = gpuc.reduce_mean %x axes = [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
  %mb = gpuc.broadcast %m : tensor<4x1xf32> -> tensor<4x8xf32>
  %c = gpuc.sub %x, %mb : tensor<4x8xf32>
  %cl = gpuc.cast %c : tensor<4x8xf32> to tensor<4x8xf16>
  %g = gpuc.matmul %cl, %w : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
  %gf = gpuc.cast %g : tensor<4x8xf16> to tensor<4x8xf32>
  %p = gpuc.mul %gf, %c : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// When the inputs are more bytes than the result (three 4x8xf16 for a
// 4x8xf32), the value rounded to 16 bits on the way (the residual sum a
// layer norm reads) is yielded and read instead.
// CHECK-LABEL: func.func @sink_exposes_rounded
// CHECK: %[[S:.+]]:3 = gpuc.fusion(%arg0, %arg1, %arg2) : (tensor<4x8xf16>, tensor<4x8xf16>, tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x1xf32>, tensor<4x8xf16>)
// CHECK: %[[G:.+]] = gpuc.matmul %[[S]]#0, %arg3
// CHECK: gpuc.fusion(%[[G]], %[[S]]#1, %[[S]]#2) : (tensor<4x8xf16>, tensor<4x1xf32>, tensor<4x8xf16>) -> tensor<4x8xf32>
func.func @sink_exposes_rounded(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>, %c3: tensor<4x8xf16>, %w: tensor<8x8xf16>) -> tensor<4x8xf32> {
  %af = gpuc.cast %a : tensor<4x8xf16> to tensor<4x8xf32>
  %bf = gpuc.cast %b : tensor<4x8xf16> to tensor<4x8xf32>
  %cf = gpuc.cast %c3 : tensor<4x8xf16> to tensor<4x8xf32>
  %s2 = gpuc.add %af, %bf : tensor<4x8xf32>
  %s = gpuc.add %s2, %cf : tensor<4x8xf32>
  %r = gpuc.cast %s : tensor<4x8xf32> to tensor<4x8xf16>
  %rf = gpuc.cast %r : tensor<4x8xf16> to tensor<4x8xf32>
  %m = gpuc.reduce_mean %rf axes = [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
  %mb = gpuc.broadcast %m : tensor<4x1xf32> -> tensor<4x8xf32>
  %c = gpuc.sub %rf, %mb : tensor<4x8xf32>
  %cl = gpuc.cast %c : tensor<4x8xf32> to tensor<4x8xf16>
  %g = gpuc.matmul %cl, %w : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
  %gf = gpuc.cast %g : tensor<4x8xf16> to tensor<4x8xf32>
  %p = gpuc.mul %gf, %c : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// Row siblings: two reductions over the same rows reading a common tensor
// are one row kernel.
// CHECK-LABEL: func.func @row_siblings
// CHECK: %[[R:.+]]:2 = gpuc.fusion(%arg0, %arg1)
// CHECK: gpuc.reduce_sum
// CHECK: gpuc.reduce_sum
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @row_siblings(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = gpuc.reduce_sum %x axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %xy = gpuc.mul %x, %y : tensor<4x8xf32>
  %b = gpuc.reduce_sum %xy axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// A reduction stays out of a parameter's update: the update (at the end of
// backward in a step) would keep the reduced tensor live until it runs.
// CHECK-LABEL: func.func @reduction_not_in_update
// CHECK: %[[G:.+]] = gpuc.fusion(%arg1) : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK: gpuc.reduce_sum
// CHECK: gpuc.fusion(%arg0, %[[G]])
gpuc.parameter @b trainable : tensor<8xf32> = dense<0.0> : tensor<8xf32>
func.func @reduction_not_in_update(%b: tensor<8xf32> {gpuc.param = @b}, %dy: tensor<4x8xf32>) -> (tensor<8xf32> {gpuc.update = @b}) {
  %g = gpuc.reduce_sum %dy axes = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %lr = gpuc.constant dense<0.1> : tensor<8xf32>
  %s = gpuc.mul %g, %lr : tensor<8xf32>
  %b2 = gpuc.sub %b, %s : tensor<8xf32>
  return %b2 : tensor<8xf32>
}

// -----

// An embedding's segment sum joins the elementwise kernel that reads it (the
// optimizer's update): each update is read once, by its row. A row kernel
// reads it stored: its passes would each redo the groups' loops.
// CHECK-LABEL: func.func @segment_sum_fusion
// CHECK: %[[G:.+]]:2 = gpuc.fusion(%arg0, %arg1, %arg2, %arg3)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[S:.+]] = gpuc.segment_sum
// CHECK-NEXT: gpuc.sub %{{.+}}, %[[S]]
// CHECK: gpuc.fusion(%[[G]]#1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.reduce_sum
func.func @segment_sum_fusion(%u: tensor<6x4xf32>, %o: tensor<11xi32>, %p: tensor<6xi32>, %w: tensor<10x4xf32>) -> (tensor<10x4xf32>, tensor<10xf32>) {
  %g = gpuc.segment_sum %u, %o, %p axis = 0 : (tensor<6x4xf32>, tensor<11xi32>, tensor<6xi32>) -> tensor<10x4xf32>
  %n = gpuc.sub %w, %g : tensor<10x4xf32>
  %s = gpuc.reduce_sum %g axes = [1] : tensor<10x4xf32> -> tensor<10xf32>
  return %n, %s : tensor<10x4xf32>, tensor<10xf32>
}

// -----

// A reader of the row statistic placed between it and the kernel that
// needs it (a chunk's loss summed before its logit gradient, through a
// reshape) moves after the merged kernel, which computes the statistic
// and its use in one pass and keeps the statistic as a result for it.
// CHECK-LABEL: func.func @reader_between
// CHECK: %[[K:.+]]:2 = gpuc.fusion(%arg0, %arg1)
// CHECK: gpuc.reduce_max
// CHECK: gpuc.sub
// CHECK: %[[R:.+]] = gpuc.reshape %[[K]]#1
// CHECK: %[[L:.+]] = gpuc.fusion(%[[R]])
// CHECK: return %[[L]], %[[K]]#0
func.func @reader_between(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %b2 = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %z = gpuc.add %x, %b2 : tensor<4x8xf32>
  %m = gpuc.reduce_max %z axes = [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
  %mr = gpuc.reshape %m : tensor<4x1xf32> -> tensor<4xf32>
  %l = gpuc.reduce_sum %mr axes = [0] : tensor<4xf32> -> tensor<f32>
  %mb = gpuc.broadcast %m : tensor<4x1xf32> -> tensor<4x8xf32>
  %y = gpuc.sub %z, %mb : tensor<4x8xf32>
  return %l, %y : tensor<f32>, tensor<4x8xf32>
}

// -----

// A row kernel is not merged into a reader past a GEMM when its input, kept
// live across the GEMM, is large beside what the GEMM allocates: each
// chunk's row kernel runs before the next chunk's logits exist (a language
// model's held-out scores), not gathered with the rest after every chunk's
// GEMM. The last chunk's merges with the sum after it.
// CHECK-LABEL: func.func @chunked_rows
// CHECK: %[[Z0:.+]] = gpuc.matmul %arg0, %arg2
// CHECK: %[[M0:.+]] = gpuc.fusion(%[[Z0]])
// CHECK: gpuc.reduce_max
// CHECK: %[[Z1:.+]] = gpuc.matmul %arg1, %arg2
// CHECK: gpuc.fusion(%[[Z1]], %[[M0]])
// CHECK: gpuc.reduce_max
// CHECK: gpuc.add
// CHECK-NOT: gpuc.fusion
func.func @chunked_rows(%x0: tensor<4x3xf32>, %x1: tensor<4x3xf32>, %w: tensor<64x3xf32>) -> tensor<4xf32> {
  %z0 = gpuc.matmul %x0, %w transpose_rhs : (tensor<4x3xf32>, tensor<64x3xf32>) -> tensor<4x64xf32>
  %m0 = gpuc.reduce_max %z0 axes = [1] : tensor<4x64xf32> -> tensor<4xf32>
  %z1 = gpuc.matmul %x1, %w transpose_rhs : (tensor<4x3xf32>, tensor<64x3xf32>) -> tensor<4x64xf32>
  %m1 = gpuc.reduce_max %z1 axes = [1] : tensor<4x64xf32> -> tensor<4xf32>
  %s = gpuc.add %m0, %m1 : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A column sum (a layer's bias gradient) whose input a later GEMM reads
// (the layer's input gradient) merges into the pointwise reader at the end
// (the optimizer's piece), which keeps that input live past the GEMMs
// between. By default the merge stands: it saves launches, and the peak is
// at the end of forward. Memory-first fusion (under a memory budget) keeps
// the sum where its input dies, before the other layer's GEMM.
// CHECK-LABEL: func.func @bias_gradient_past_gemms
// CHECK: %[[G:.+]] = gpuc.matmul %arg0, %arg2
// CHECK: gpuc.matmul %[[G]], %arg2
// CHECK: gpuc.matmul %arg1, %arg2
// CHECK: gpuc.fusion(%[[G]])
// CHECK: gpuc.reduce_sum
// CHECK: gpuc.mul
// MEM-LABEL: func.func @bias_gradient_past_gemms
// MEM: %[[G:.+]] = gpuc.matmul %arg0, %arg2
// MEM: %[[B:.+]] = gpuc.fusion(%[[G]])
// MEM: gpuc.reduce_sum
// MEM: gpuc.matmul %[[G]], %arg2
// MEM: gpuc.matmul %arg1, %arg2
// MEM: gpuc.fusion(%[[B]])
// MEM: gpuc.mul
func.func @bias_gradient_past_gemms(%a: tensor<64x8xf32>, %x: tensor<64x8xf32>, %w: tensor<8x8xf32>) -> (tensor<64x8xf32>, tensor<64x8xf32>, tensor<8xf32>) {
  %g = gpuc.matmul %a, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %b = gpuc.reduce_sum %g axes = [0] : tensor<64x8xf32> -> tensor<8xf32>
  %dx = gpuc.matmul %g, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %y = gpuc.matmul %x, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %u = gpuc.mul %b, %b : tensor<8xf32>
  return %dx, %y, %u : tensor<64x8xf32>, tensor<64x8xf32>, tensor<8xf32>
}

// -----

// The same, the GEMM reading its input through a reshape made before the
// sum (Hugging Face's bias gradient sums [B, T, C], its GEMMs read the
// [B*T, C] view): the view's readers keep the input live, and the merge
// stands as above; memory-first, the sum stays before the GEMMs.
// CHECK-LABEL: func.func @bias_gradient_past_viewing_gemms
// CHECK: %[[G:.+]] = gpuc.matmul %arg0, %arg2
// CHECK: %[[T:.+]] = gpuc.reshape %[[G]] : tensor<64x8xf32> -> tensor<4x16x8xf32>
// CHECK: %[[ROWS:.+]] = gpuc.reshape %[[G]] : tensor<64x8xf32> -> tensor<64x8xf32>
// CHECK: gpuc.matmul %[[ROWS]], %arg2
// CHECK: gpuc.matmul %arg1, %arg2
// CHECK: gpuc.fusion(%[[T]])
// CHECK: gpuc.reduce_sum
// CHECK: gpuc.mul
// MEM-LABEL: func.func @bias_gradient_past_viewing_gemms
// MEM: %[[T:.+]] = gpuc.reshape
// MEM: %[[B:.+]] = gpuc.fusion(%[[T]])
// MEM: gpuc.reduce_sum
// MEM: gpuc.matmul
// MEM: gpuc.matmul %arg1, %arg2
// MEM: gpuc.fusion(%[[B]])
// MEM: gpuc.mul
func.func @bias_gradient_past_viewing_gemms(%a: tensor<64x8xf32>, %x: tensor<64x8xf32>, %w: tensor<8x8xf32>) -> (tensor<64x8xf32>, tensor<64x8xf32>, tensor<8xf32>) {
  %g = gpuc.matmul %a, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %t = gpuc.reshape %g : tensor<64x8xf32> -> tensor<4x16x8xf32>
  %rows = gpuc.reshape %g : tensor<64x8xf32> -> tensor<64x8xf32>
  %b = gpuc.reduce_sum %t axes = [0, 1] : tensor<4x16x8xf32> -> tensor<8xf32>
  %dx = gpuc.matmul %rows, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %y = gpuc.matmul %x, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %u = gpuc.mul %b, %b : tensor<8xf32>
  return %dx, %y, %u : tensor<64x8xf32>, tensor<64x8xf32>, tensor<8xf32>
}
