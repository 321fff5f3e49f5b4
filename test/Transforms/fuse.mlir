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
// CHECK: %[[G:.+]]:2 = gpuc.fusion(%arg0, %arg1, %arg2)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.max_pool2d_backward
// CHECK-NOT: reduce_sum
// CHECK: gpuc.fusion(%[[G]]#0, %[[G]]#1)
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

// Not when the reader would read a new tensor of that size: here it reads
// the matmul's result and the stored product only, so the product stays.
// CHECK-LABEL: func.func @no_sink_new_operand
// CHECK: %[[E:.+]]:2 = gpuc.fusion(%arg0, %arg2)
// CHECK: gpuc.fusion(%[[E]]#0, %{{.+}})
func.func @no_sink_new_operand(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>, %s: tensor<8xf32>) -> tensor<4x8xf32> {
  %d = gpuc.exp %a : tensor<4x8xf32>
  %sb = gpuc.broadcast %s : tensor<8xf32> -> tensor<4x8xf32>
  %e = gpuc.mul %d, %sb : tensor<4x8xf32>
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

// When the inputs are as many bytes as the result (two 4x8xf16 for a
// 4x8xf32), the value rounded to 16 bits on the way (the residual sum a
// layer norm reads) is yielded and read instead.
// CHECK-LABEL: func.func @sink_exposes_rounded
// CHECK: %[[S:.+]]:3 = gpuc.fusion(%arg0, %arg1) : (tensor<4x8xf16>, tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x1xf32>, tensor<4x8xf16>)
// CHECK: %[[G:.+]] = gpuc.matmul %[[S]]#0, %arg2
// CHECK: gpuc.fusion(%[[G]], %[[S]]#1, %[[S]]#2) : (tensor<4x8xf16>, tensor<4x1xf32>, tensor<4x8xf16>) -> tensor<4x8xf32>
func.func @sink_exposes_rounded(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>, %w: tensor<8x8xf16>) -> tensor<4x8xf32> {
  %af = gpuc.cast %a : tensor<4x8xf16> to tensor<4x8xf32>
  %bf = gpuc.cast %b : tensor<4x8xf16> to tensor<4x8xf32>
  %s = gpuc.add %af, %bf : tensor<4x8xf32>
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
