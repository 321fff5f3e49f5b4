// RUN: gpuc-opt %s --gpuc-decompose -split-input-file | FileCheck %s
// RUN: gpuc-opt %s --gpuc-decompose=attention=flash -split-input-file | FileCheck %s --check-prefix=FLASH
// RUN: not gpuc-opt %s --gpuc-decompose=attention=dense -split-input-file 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: gpuc-opt %s --gpuc-decompose=attention=flash -split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=LOSTWEIGHTS
// RUN: gpuc-opt %s --gpuc-decompose=loss-chunk-rows=4 -split-input-file | FileCheck %s --check-prefix=CHUNK
// RUN: gpuc-opt %s --gpuc-decompose=pad-classes=64 -split-input-file | FileCheck %s --check-prefix=PAD
// RUN: gpuc-opt %s --gpuc-decompose=loss-chunk-bytes=6750000 -split-input-file | FileCheck %s --check-prefix=EVEN
// RUN: not gpuc-opt %s --gpuc-decompose=loss-chunk-bytes=0 -split-input-file 2>&1 | FileCheck %s --check-prefix=ZEROBYTES
// RUN: not gpuc-opt %s --gpuc-decompose=pad-classes=-1 -split-input-file 2>&1 | FileCheck %s --check-prefix=NEGPAD
// RUN: gpuc-opt %s --gpuc-decompose=triangle-band-rows=2 -split-input-file | FileCheck %s --check-prefix=BANDS
// RUN: not gpuc-opt %s --gpuc-decompose=triangle-band-rows=-1 -split-input-file 2>&1 | FileCheck %s --check-prefix=NEGBANDS
// ZEROBYTES: loss-chunk-bytes 0 is not a positive size
// NEGPAD: pad-classes -1 is negative
// UNKNOWN: unknown attention lowering 'dense'; the lowerings are gemm and flash

// Composite ops become reductions and elementwise core ops.

// CHECK-LABEL: func.func @softmax
// CHECK: %[[MAX:.+]] = gpuc.reduce_max %arg0 axes = [1] keep_dims
// CHECK: %[[SHIFT:.+]] = gpuc.sub %arg0, %{{.+}}
// CHECK: %[[E:.+]] = gpuc.exp %[[SHIFT]]
// CHECK: %[[SUM:.+]] = gpuc.reduce_sum %[[E]] axes = [1] keep_dims
// CHECK: %[[S:.+]] = gpuc.broadcast %[[SUM]]
// CHECK: gpuc.div %[[E]], %[[S]]
// CHECK-NOT: gpuc.softmax
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %y = gpuc.softmax %x axis = 1 : tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// From logits: (max - x[label]) + log(sum(exp(x - max))), the labelled
// logit picked by a sum over the row that does not wait for the maximum.
// CHECK-LABEL: func.func @cross_entropy
// CHECK: %[[N:.+]] = gpuc.constant dense<4.000000e+00> : tensor<f32>
// CHECK: %[[CLASSES:.+]] = gpuc.iota dim = 1 : tensor<4x10xi64>
// CHECK: %[[HOT:.+]] = gpuc.compare eq, %[[CLASSES]]
// CHECK: %[[MASK:.+]] = gpuc.cast %[[HOT]] : tensor<4x10xi1> to tensor<4x10xf32>
// CHECK: %[[X:.+]] = gpuc.mul %arg0, %[[MASK]]
// CHECK: %[[PICK:.+]] = gpuc.reduce_sum %[[X]] axes = [1] : tensor<4x10xf32> -> tensor<4xf32>
// CHECK: %[[MAX:.+]] = gpuc.reduce_max %arg0 axes = [1] keep_dims
// CHECK: %[[SUM:.+]] = gpuc.reduce_sum %{{.+}} axes = [1] keep_dims
// CHECK: %[[LOG:.+]] = gpuc.log %[[SUM]]
// CHECK: %[[LOGS:.+]] = gpuc.reshape %[[LOG]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK: %[[MAXS:.+]] = gpuc.reshape %[[MAX]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK: %[[MARGIN:.+]] = gpuc.sub %[[MAXS]], %[[PICK]]
// CHECK: %[[LOSSES:.+]] = gpuc.add %[[MARGIN]], %[[LOGS]]
// CHECK: %[[TOTAL:.+]] = gpuc.reduce_sum %[[LOSSES]] axes = [0]
// CHECK: gpuc.div %[[TOTAL]], %[[N]]
// CHECK-NOT: gpuc.cross_entropy
func.func @cross_entropy(%x: tensor<4x10xf32>, %l: tensor<4xi64>) -> tensor<f32> {
  %y = gpuc.cross_entropy %x, %l reduction = mean : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @layer_norm
// CHECK: gpuc.reduce_mean %arg0 axes = [1] keep_dims
// CHECK: %[[C:.+]] = gpuc.sub %arg0
// CHECK: %[[SQ:.+]] = gpuc.mul %[[C]], %[[C]]
// CHECK: gpuc.reduce_mean %[[SQ]] axes = [1] keep_dims
// CHECK: gpuc.rsqrt
// CHECK: gpuc.broadcast %arg1 : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NOT: gpuc.layer_norm
func.func @layer_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = gpuc.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The unbiased running variance scales the batch variance by n/(n-1) = 36/35
// on top of (1 - momentum).
// CHECK-LABEL: func.func @batch_norm
// CHECK-DAG: %[[VARSCALE:.+]] = gpuc.constant dense<0.102857143> : tensor<2xf32>
// CHECK-DAG: %[[MOM:.+]] = gpuc.constant dense<0.899999976> : tensor<2xf32>
// CHECK-DAG: %[[ONEMINUS:.+]] = gpuc.constant dense<1.000000e-01> : tensor<2xf32>
// CHECK: %[[MEAN:.+]] = gpuc.reduce_mean %arg0 axes = [0, 2, 3] keep_dims
// CHECK: %[[VAR:.+]] = gpuc.reduce_mean %{{.+}} axes = [0, 2, 3] keep_dims
// CHECK: %[[M:.+]] = gpuc.reshape %[[MEAN]] : tensor<1x2x1x1xf32> -> tensor<2xf32>
// CHECK: gpuc.mul %[[M]], %[[ONEMINUS]]
// CHECK: gpuc.mul %arg3, %[[MOM]]
// CHECK: %[[V:.+]] = gpuc.reshape %[[VAR]] : tensor<1x2x1x1xf32> -> tensor<2xf32>
// CHECK: gpuc.mul %[[V]], %[[VARSCALE]]
// CHECK-NOT: gpuc.batch_norm_train
func.func @batch_norm(%x: tensor<4x2x3x3xf32>, %g: tensor<2xf32>, %b: tensor<2xf32>, %rm: tensor<2xf32>, %rv: tensor<2xf32>) -> (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>) {
  %y, %m, %v = gpuc.batch_norm_train %x, %g, %b, %rm, %rv epsilon = 1.0e-05 momentum = 9.0e-01 unbiased_running_var : tensor<4x2x3x3xf32>, tensor<2xf32>
  return %y, %m, %v : tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Synchronized over the ranks: the sums and the count (36 per channel here)
// are all-reduced, numbered after the all-reduces already in the function;
// the running variance's n / (n - 1) uses the global count.
// CHECK-LABEL: func.func @batch_norm_sync
// CHECK: %[[N:.+]] = gpuc.constant dense<3.600000e+01> : tensor<f32>
// CHECK: %[[S:.+]] = gpuc.reduce_sum %arg0 axes = [0, 2, 3] keep_dims
// CHECK: %[[R:.+]]:2 = gpuc.all_reduce %[[S]], %[[N]] bucket = 6 : tensor<1x2x1x1xf32>, tensor<f32>
// CHECK: gpuc.div %[[R]]#0
// CHECK: %[[Q:.+]]:2 = gpuc.all_reduce %{{.+}}, %{{.+}} bucket = 7 : tensor<1x2x1x1xf32>, tensor<f32>
// CHECK: gpuc.sub %[[Q]]#1, %{{.+}} : tensor<f32>
// CHECK-NOT: gpuc.batch_norm_train
func.func @batch_norm_sync(%x: tensor<4x2x3x3xf32>, %g: tensor<2xf32>, %b: tensor<2xf32>, %rm: tensor<2xf32>, %rv: tensor<2xf32>) -> (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %r = gpuc.all_reduce %g bucket = 5 : tensor<2xf32>
  %y, %m, %v = gpuc.batch_norm_train %x, %g, %b, %rm, %rv epsilon = 1.0e-05 momentum = 9.0e-01 unbiased_running_var sync_ranks : tensor<4x2x3x3xf32>, tensor<2xf32>
  return %y, %m, %v, %r : tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @mse
// CHECK: %[[D:.+]] = gpuc.sub %arg0, %arg1
// CHECK: %[[SQ:.+]] = gpuc.mul %[[D]], %[[D]]
// CHECK: gpuc.reduce_sum %[[SQ]] axes = [0, 1] : tensor<4x3xf32> -> tensor<f32>
func.func @mse(%x: tensor<4x3xf32>, %t: tensor<4x3xf32>) -> tensor<f32> {
  %y = gpuc.mse_loss %x, %t reduction = sum : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// scatter_add: the positions grouped by the row they name, then a sum per
// row over its group; no pass compares every row with every index.
// CHECK-LABEL: func.func @scatter_add
// CHECK: %[[IDS:.+]] = gpuc.reshape %arg1 : tensor<2x3xi64> -> tensor<6xi64>
// CHECK: %[[OFFSETS:.+]], %[[ORDER:.+]] = gpuc.row_groups %[[IDS]] rows = 5 : tensor<6xi64> -> tensor<6xi32>, tensor<6xi32>
// CHECK: %[[U:.+]] = gpuc.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: gpuc.segment_sum %[[U]], %[[OFFSETS]], %[[ORDER]] axis = 0 : (tensor<6x4xf32>, tensor<6xi32>, tensor<6xi32>) -> tensor<5x4xf32>
// CHECK-NOT: gpuc.scatter_add
// CHECK-NOT: gpuc.reduce_sum
func.func @scatter_add(%u: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>) -> tensor<5x4xf32> {
  %g = gpuc.scatter_add %u, %ids axis = 0 : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<5x4xf32>
  return %g : tensor<5x4xf32>
}

// -----

// Along an inner axis: the updates keep the outer dimension.
// CHECK-LABEL: func.func @scatter_add_axis1
// CHECK: %[[OFFSETS:.+]], %[[ORDER:.+]] = gpuc.row_groups %arg1 rows = 3 : tensor<4xi64> -> tensor<4xi32>, tensor<4xi32>
// CHECK: gpuc.segment_sum %arg0, %[[OFFSETS]], %[[ORDER]] axis = 1 : (tensor<2x4xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x3xf32>
func.func @scatter_add_axis1(%u: tensor<2x4xf32>, %ids: tensor<4xi64>) -> tensor<2x3xf32> {
  %g = gpuc.scatter_add %u, %ids axis = 1 : (tensor<2x4xf32>, tensor<4xi64>) -> tensor<2x3xf32>
  return %g : tensor<2x3xf32>
}

// -----

// The GEMM lowering: Q K^T, one row kernel's worth of ops (scale, mask,
// maximum, normalizer, the weights and their logsumexp), then the weights
// times V.
// CHECK-LABEL: func.func @attention
// CHECK: %[[S:.+]] = gpuc.matmul %arg0, %arg1 transpose_rhs
// CHECK: %[[Z:.+]] = gpuc.mul %[[S]]
// CHECK: %[[WIDE:.+]] = gpuc.broadcast %arg3 : tensor<1x1x6x6xi1> -> tensor<2x3x6x6xi1>
// CHECK: %[[M:.+]] = gpuc.select %[[WIDE]], %{{.+}}, %[[Z]]
// CHECK: %[[MAX:.+]] = gpuc.reduce_max %[[M]] axes = [3] keep_dims
// CHECK: %[[E:.+]] = gpuc.exp
// CHECK: %[[SUM:.+]] = gpuc.reduce_sum %[[E]] axes = [3] keep_dims
// CHECK: %[[P:.+]] = gpuc.div %[[E]]
// CHECK: %[[LOG:.+]] = gpuc.log %[[SUM]]
// CHECK: %[[LSE:.+]] = gpuc.add %[[MAX]], %[[LOG]]
// CHECK: gpuc.reshape %[[LSE]] : tensor<2x3x6x1xf32> -> tensor<2x3x6xf32>
// CHECK: gpuc.matmul %[[P]], %arg2 :
// CHECK-NOT: gpuc.attention
// FLASH-LABEL: func.func @attention
// FLASH: gpuc.attention %arg0, %arg1, %arg2 mask %arg3
func.func @attention(%q: tensor<2x3x6x4xf32>, %k: tensor<2x3x6x4xf32>, %v: tensor<2x3x6x4xf32>, %m: tensor<1x1x6x6xi1>) -> (tensor<2x3x6x4xf32>, tensor<2x3x6xf32>) {
  %o, %lse = gpuc.attention %q, %k, %v mask %m : tensor<1x1x6x6xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32> -> tensor<2x3x6x4xf32>, tensor<2x3x6xf32>
  return %o, %lse : tensor<2x3x6x4xf32>, tensor<2x3x6xf32>
}

// -----

// The gradient recomputes the weights as exp(scores - logsumexp), one
// elementwise pass over Q K^T; dropout drops the weights and their
// gradient alike; a finite fill zeroes the excluded scores' gradient.
// CHECK-LABEL: func.func @attention_grad
// CHECK: %[[S:.+]] = gpuc.matmul %arg0, %arg1 transpose_rhs
// CHECK: %[[P:.+]] = gpuc.exp
// CHECK: %[[PD:.+]] = gpuc.dropout %[[P]], %arg6 stream = 4
// CHECK: %[[DV:.+]] = gpuc.matmul %[[PD]], %arg5 transpose_lhs
// CHECK: %[[DPD:.+]] = gpuc.matmul %arg5, %arg2 transpose_rhs
// CHECK: %[[DP:.+]] = gpuc.dropout %[[DPD]], %arg6 stream = 4
// CHECK: %[[PDP:.+]] = gpuc.mul %[[P]], %[[DP]]
// CHECK: %[[DOT:.+]] = gpuc.reduce_sum %[[PDP]] axes = [3] keep_dims
// CHECK: gpuc.select
// CHECK: %[[DQ:.+]] = gpuc.matmul %[[DS:.+]], %arg1 :
// CHECK: %[[DK:.+]] = gpuc.matmul %[[DS]], %arg0 transpose_lhs
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
// FLASH-LABEL: func.func @attention_grad
// FLASH: gpuc.attention_grad
func.func @attention_grad(%q: tensor<2x3x6x4xf32>, %k: tensor<2x3x6x4xf32>, %v: tensor<2x3x6x4xf32>, %o: tensor<2x3x6x4xf32>, %lse: tensor<2x3x6xf32>, %do: tensor<2x3x6x4xf32>, %key: tensor<2xi64>, %m: tensor<2x1x1x6xi1>) -> (tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>) {
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do mask %m : tensor<2x1x1x6xi1> key %key scale = 5.000000e-01 fill = -1.000000e+04 {dropout = 1.000000e-01 : f64, stream = 4 : i64} : tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6xf32>
  return %dq, %dk, %dv : tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>
}

// -----

// Grouped-query attention's GEMMs read each key and value head repeated for
// its group of query heads; the keys' and values' gradients sum over the
// group.
// CHECK-LABEL: func.func @grouped_attention_grad
// CHECK: %[[K1:.+]] = gpuc.reshape %arg1 : tensor<2x2x6x4xf32> -> tensor<2x2x1x6x4xf32>
// CHECK: %[[KG:.+]] = gpuc.broadcast %[[K1]] : tensor<2x2x1x6x4xf32> -> tensor<2x2x3x6x4xf32>
// CHECK: %[[K:.+]] = gpuc.reshape %[[KG]] : tensor<2x2x3x6x4xf32> -> tensor<2x6x6x4xf32>
// CHECK: gpuc.matmul %arg0, %[[K]] transpose_rhs
// CHECK: %[[DV:.+]] = gpuc.matmul {{.+}} transpose_lhs : (tensor<2x6x6x6xf32>, tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
// CHECK: %[[DQ:.+]] = gpuc.matmul %[[DS:.+]], %{{.+}} : (tensor<2x6x6x6xf32>, tensor<2x6x6x4xf32>)
// CHECK: %[[DK:.+]] = gpuc.matmul %[[DS]], %arg0 transpose_lhs
// CHECK: %[[DKG:.+]] = gpuc.reshape %[[DK]] : tensor<2x6x6x4xf32> -> tensor<2x2x3x6x4xf32>
// CHECK: %[[DKS:.+]] = gpuc.reduce_sum %[[DKG]] axes = [2] : tensor<2x2x3x6x4xf32> -> tensor<2x2x6x4xf32>
// CHECK: %[[DVG:.+]] = gpuc.reshape %[[DV]] : tensor<2x6x6x4xf32> -> tensor<2x2x3x6x4xf32>
// CHECK: %[[DVS:.+]] = gpuc.reduce_sum %[[DVG]] axes = [2] : tensor<2x2x3x6x4xf32> -> tensor<2x2x6x4xf32>
// CHECK: return %[[DQ]], %[[DKS]], %[[DVS]]
// FLASH-LABEL: func.func @grouped_attention_grad
// FLASH: gpuc.attention_grad %arg0, %arg1, %arg2
func.func @grouped_attention_grad(%q: tensor<2x6x6x4xf32>, %k: tensor<2x2x6x4xf32>, %v: tensor<2x2x6x4xf32>, %o: tensor<2x6x6x4xf32>, %lse: tensor<2x6x6xf32>, %do: tensor<2x6x6x4xf32>) -> (tensor<2x6x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>) {
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x6x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x6x6x4xf32>, tensor<2x6x6xf32>
  return %dq, %dk, %dv : tensor<2x6x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>
}

// -----

// A causal mask (true where the key comes after the query) is compared
// from the indices: the row kernel reads no mask.
// CHECK-LABEL: func.func @causal_attention
// CHECK-DAG: %[[QUERY:.+]] = gpuc.iota dim = 2 : tensor<2x3x4x4xi64>
// CHECK-DAG: %[[KEY:.+]] = gpuc.iota dim = 3 : tensor<2x3x4x4xi64>
// CHECK: %[[MASK:.+]] = gpuc.compare gt, %[[KEY]], %[[QUERY]]
// CHECK: gpuc.select %[[MASK]]
// CHECK-NOT: gpuc.broadcast %{{.+}} : tensor<1x1x4x4xi1>
// The flash lowering keeps the op and marks the mask's form for the fused
// kernels, which compare indices: the operand, and the constant, go. A mask
// that is no triangle stays unmarked.
// FLASH-LABEL: func.func @causal_attention
// FLASH-NOT: gpuc.constant
// FLASH: gpuc.attention %arg0, %arg1, %arg2 scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt :
func.func @causal_attention(%q: tensor<2x3x4x2xf32>, %k: tensor<2x3x4x2xf32>, %v: tensor<2x3x4x2xf32>) -> (tensor<2x3x4x2xf32>, tensor<2x3x4xf32>) {
  %m = gpuc.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %o, %lse = gpuc.attention %q, %k, %v mask %m : tensor<1x1x4x4xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32> -> tensor<2x3x4x2xf32>, tensor<2x3x4xf32>
  return %o, %lse : tensor<2x3x4x2xf32>, tensor<2x3x4xf32>
}

// -----

// nanoGPT's mask: a frozen tril buffer compared with 0. The step computes
// it from the indices, and the parameter records what its values must be
// (the trainer checks what it loads); a mask that is not a triangle stays
// a load.
// CHECK: gpuc.parameter @bias : tensor<1x1x3x3xf32> = dense<{{.+}}> {gpuc.compiled_mask = {compare = "eq", key_vs_query = "gt", with = 0.000000e+00 : f64}, gpuc.frozen = "no gradient reaches it"}
// CHECK: gpuc.parameter @padding : tensor<1x1x3x3xf32>
// CHECK-NOT: compiled_mask
// CHECK-LABEL: func.func @frozen_mask
// CHECK: gpuc.iota dim = 2
// CHECK: gpuc.compare gt
// CHECK: gpuc.broadcast %{{.+}} : tensor<1x1x3x3xi1> -> tensor<1x2x3x3xi1>
// FLASH: gpuc.parameter @bias : tensor<1x1x3x3xf32> = dense<{{.+}}> {gpuc.compiled_mask = {compare = "eq", key_vs_query = "gt", with = 0.000000e+00 : f64}, gpuc.frozen = "no gradient reaches it"}
// FLASH-LABEL: func.func @frozen_mask
// FLASH-NOT: gpuc.compare eq, %arg3
// FLASH: gpuc.attention %arg0, %arg1, %arg2 scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt :
// FLASH: %[[PADDED:.+]] = gpuc.compare eq, %arg4
// FLASH: gpuc.attention %arg0, %arg1, %arg2 mask %[[PADDED]]
// FLASH-NOT: triangle
gpuc.parameter @bias : tensor<1x1x3x3xf32> = dense<[[[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]]]> : tensor<1x1x3x3xf32> {gpuc.frozen = "no gradient reaches it"}
gpuc.parameter @padding : tensor<1x1x3x3xf32> = dense<[[[[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]]]> : tensor<1x1x3x3xf32> {gpuc.frozen = "no gradient reaches it"}
func.func @frozen_mask(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>, %bias: tensor<1x1x3x3xf32> {gpuc.param = @bias}, %padding: tensor<1x1x3x3xf32> {gpuc.param = @padding}) -> (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) {
  %zero = gpuc.constant dense<0.0> : tensor<1x1x3x3xf32>
  %causal = gpuc.compare eq, %bias, %zero : tensor<1x1x3x3xf32>
  %o, %lse = gpuc.attention %q, %k, %v mask %causal : tensor<1x1x3x3xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>, tensor<1x2x3xf32>
  %padded = gpuc.compare eq, %padding, %zero : tensor<1x1x3x3xf32>
  %o2, %lse2 = gpuc.attention %q, %k, %v mask %padded : tensor<1x1x3x3xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>, tensor<1x2x3xf32>
  return %o, %o2 : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>
}

// -----

// An attention the flash lowering left with a triangle and no mask lowers
// to GEMMs with the triangle compared from the indices, forward and back.
// CHECK-LABEL: func.func @triangle_without_mask
// CHECK-DAG: %[[QUERY:.+]] = gpuc.iota dim = 2 : tensor<1x2x3x3xi64>
// CHECK-DAG: %[[KEY:.+]] = gpuc.iota dim = 3 : tensor<1x2x3x3xi64>
// CHECK: %[[MASK:.+]] = gpuc.compare le, %[[KEY]], %[[QUERY]]
// CHECK: gpuc.select %[[MASK]]
// CHECK: gpuc.compare le
// CHECK-NOT: gpuc.attention
// FLASH-LABEL: func.func @triangle_without_mask
// FLASH: gpuc.attention %arg0, %arg0, %arg0 scale = 5.000000e-01 fill = -1.000000e+04 triangle le {mask_keeps}
// FLASH: gpuc.attention_grad %arg0, %arg0, %arg0, %{{.+}} scale = 5.000000e-01 fill = -1.000000e+04 triangle le {mask_keeps}
func.func @triangle_without_mask(%q: tensor<1x2x3x2xf32>, %do: tensor<1x2x3x2xf32>) -> (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) {
  %o, %lse = gpuc.attention %q, %q, %q scale = 5.000000e-01 fill = -1.000000e+04 triangle le {mask_keeps} : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>, tensor<1x2x3xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %q, %q, %o, %lse, %do scale = 5.000000e-01 fill = -1.000000e+04 triangle le {mask_keeps} : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3xf32>
  return %o, %dq : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>
}

// -----

// Hugging Face's padded batch: its causal mask (a constant repeated over
// the batch) and'ed with a padding mask the inputs make. The flash
// lowering marks the triangle and keeps the padding as the operand, as
// it was before its broadcast over the queries; the GEMM lowering of such
// an op ands the triangle's comparison with the operand again.
// A padding mask may exclude a row's every key, which a causal mask alone
// never does: the fill's warning is said.
// CHECK-LABEL: func.func @triangle_and_padding
// CHECK: gpuc.select
// CHECK-NOT: gpuc.attention
// LOSTWEIGHTS-NOT: warning
// LOSTWEIGHTS: warning: masks scores with a fill of -3.000000e+38
// FLASH-LABEL: func.func @triangle_and_padding
// FLASH: gpuc.attention %arg0, %arg0, %arg0 mask %arg1 : tensor<2x1x1x4xi1> scale = 5.000000e-01 fill = -3.000000e+38 triangle le {mask_keeps}
func.func @triangle_and_padding(%q: tensor<2x2x4x2xf32>, %keep: tensor<2x1x1x4xi1>) -> tensor<2x2x4x2xf32> {
  %causal = gpuc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]], [[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<2x1x4x4xi1>
  %no = gpuc.constant dense<false> : tensor<2x1x4x4xi1>
  %padding = gpuc.broadcast %keep : tensor<2x1x1x4xi1> -> tensor<2x1x4x4xi1>
  %m = gpuc.select %causal, %padding, %no : tensor<2x1x4x4xi1>, tensor<2x1x4x4xi1>
  %o, %lse = gpuc.attention %q, %q, %q mask %m : tensor<2x1x4x4xi1> scale = 5.000000e-01 fill = -3.000000e+38 {mask_keeps} : tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>, tensor<2x2x4xf32>
  return %o : tensor<2x2x4x2xf32>
}

// -----

// The GEMM lowering of a triangle with a padding operand: excluded where
// either excludes (the keeping bits and'ed).
// CHECK-LABEL: func.func @lower_triangle_and_padding
// CHECK-DAG: %[[QUERY:.+]] = gpuc.iota dim = 2 : tensor<2x2x4x4xi64>
// CHECK-DAG: %[[KEY:.+]] = gpuc.iota dim = 3 : tensor<2x2x4x4xi64>
// CHECK-DAG: %[[TRIANGLE:.+]] = gpuc.compare le, %[[KEY]], %[[QUERY]]
// CHECK-DAG: %[[PADDING:.+]] = gpuc.broadcast %arg1 : tensor<2x1x1x4xi1> -> tensor<2x2x4x4xi1>
// CHECK-DAG: %[[NO:.+]] = gpuc.constant dense<false> : tensor<2x2x4x4xi1>
// CHECK: %[[KEPT:.+]] = gpuc.select %[[TRIANGLE]], %[[PADDING]], %[[NO]]
// CHECK: gpuc.select %[[KEPT]]
func.func @lower_triangle_and_padding(%q: tensor<2x2x4x2xf32>, %keep: tensor<2x1x1x4xi1>) -> tensor<2x2x4x2xf32> {
  %o, %lse = gpuc.attention %q, %q, %q mask %keep : tensor<2x1x1x4xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle le {mask_keeps} : tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>, tensor<2x2x4xf32>
  return %o : tensor<2x2x4x2xf32>
}

// -----

// An attention and the gradient autodiff built for it lower together: the
// backward GEMMs read the forward's weights (kept, as the exported chain
// kept them), and Q K^T is not recomputed.
// CHECK-LABEL: func.func @attention_with_grad
// CHECK: gpuc.matmul %arg0, %arg1 transpose_rhs
// CHECK: %[[P:.+]] = gpuc.div
// CHECK-NOT: gpuc.matmul %arg0, %arg1 transpose_rhs
// CHECK: gpuc.matmul %[[P]], %arg3 transpose_lhs
// CHECK-NOT: gpuc.attention
func.func @attention_with_grad(%q: tensor<2x3x6x4xf32>, %k: tensor<2x3x6x4xf32>, %v: tensor<2x3x6x4xf32>, %do: tensor<2x3x6x4xf32>) -> (tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>) {
  %o, %lse = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32> -> tensor<2x3x6x4xf32>, tensor<2x3x6xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6xf32>
  return %o, %dq, %dk, %dv : tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>
}

// -----

// A language model's head and loss with the gradient autodiff built: the
// forward reads the gradient op's loss. In one chunk (the default here:
// 10 rows of 12 logits are far under the chunk's bytes) it is the plain
// head; in chunks of 4 rows (4 + 4 + 2) each chunk's logits come from its
// rows of the input, its rows of the input's gradient are concatenated,
// and the weight's gradient accumulates. The softmax the gradient takes is
// each exponential times its row's reciprocal, no division of the logits.
// CHECK-LABEL: func.func @linear_loss
// CHECK-NOT: gpuc.linear_cross_entropy
// CHECK: %[[Z:.+]] = gpuc.matmul %arg0, %arg1 transpose_rhs : (tensor<10x3xf32>, tensor<12x3xf32>) -> tensor<10x12xf32>
// CHECK: %[[E:.+]] = gpuc.exp %{{.+}} : tensor<10x12xf32>
// CHECK: %[[SUM:.+]] = gpuc.reduce_sum %[[E]] axes = [1] keep_dims
// CHECK-NOT: gpuc.div %{{.+}} : tensor<10x12xf32>
// CHECK: %[[R:.+]] = gpuc.reciprocal %[[SUM]] : tensor<10x1xf32>
// CHECK: %[[WIDE:.+]] = gpuc.broadcast %[[R]] : tensor<10x1xf32> -> tensor<10x12xf32>
// CHECK: gpuc.mul %[[E]], %[[WIDE]] : tensor<10x12xf32>
// CHECK-NOT: gpuc.div %{{.+}} : tensor<10x12xf32>
// CHECK: %[[DX:.+]] = gpuc.matmul %{{.+}}, %arg1 : (tensor<10x12xf32>, tensor<12x3xf32>) -> tensor<10x3xf32>
// CHECK: %[[DW:.+]] = gpuc.matmul %{{.+}}, %arg0 transpose_lhs : (tensor<10x12xf32>, tensor<10x3xf32>) -> tensor<12x3xf32>
// CHECK-NOT: gpuc.concat
// CHECK: return %{{.+}}, %[[DX]], %[[DW]]
// PAD-LABEL: func.func @linear_loss
// PAD-NOT: gpuc.pad
// PAD: return
// CHUNK-LABEL: func.func @linear_loss
// CHUNK: %[[X0:.+]] = gpuc.slice %arg0 starts = [0, 0] limits = [4, 3]
// CHUNK: %[[Y0:.+]] = gpuc.slice %arg2 starts = [0] limits = [4]
// CHUNK: gpuc.matmul %[[X0]], %arg1 transpose_rhs : (tensor<4x3xf32>, tensor<12x3xf32>) -> tensor<4x12xf32>
// CHUNK: %[[DX0:.+]] = gpuc.matmul %{{.+}}, %arg1 : (tensor<4x12xf32>, tensor<12x3xf32>) -> tensor<4x3xf32>
// CHUNK: %[[DW0:.+]] = gpuc.matmul %{{.+}}, %[[X0]] transpose_lhs : (tensor<4x12xf32>, tensor<4x3xf32>) -> tensor<12x3xf32>
// CHUNK: gpuc.slice %arg0 starts = [4, 0] limits = [8, 3]
// CHUNK: %[[DW1:.+]] = gpuc.matmul %{{.+}}, %{{.+}} transpose_lhs plus %[[DW0]]
// CHUNK: %[[X2:.+]] = gpuc.slice %arg0 starts = [8, 0] limits = [10, 3]
// CHUNK: %[[DX2:.+]] = gpuc.matmul %{{.+}}, %arg1 : (tensor<2x12xf32>, tensor<12x3xf32>) -> tensor<2x3xf32>
// CHUNK: %[[DW2:.+]] = gpuc.matmul %{{.+}}, %[[X2]] transpose_lhs plus %[[DW1]]
// CHUNK: %[[DX:.+]] = gpuc.concat %[[DX0]], %{{.+}}, %[[DX2]] axis = 0
// CHUNK: return %{{.+}}, %[[DX]], %[[DW2]]
func.func @linear_loss(%x: tensor<10x3xf32>, %w: tensor<12x3xf32>, %y: tensor<10xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<10x3xf32>, tensor<12x3xf32>) {
  %l0 = gpuc.linear_cross_entropy %x, %w, %y reduction = mean : (tensor<10x3xf32>, tensor<12x3xf32>, tensor<10xi64>) -> tensor<f32>
  %l, %dx, %dw = gpuc.linear_cross_entropy_grad %x, %w, %y, %g reduction = mean : (tensor<10x3xf32>, tensor<12x3xf32>, tensor<10xi64>, tensor<f32>) -> (tensor<f32>, tensor<10x3xf32>, tensor<12x3xf32>)
  return %l0, %dx, %dw : tensor<f32>, tensor<10x3xf32>, tensor<12x3xf32>
}

// -----

// With pad-classes=64, a head of 1,030 classes runs over its weight padded
// with zero rows to 1,088, the padded logits -inf; the labelled logit is
// picked before them, and the weight's gradient is cut back to 1,030 rows.
// A head under 1,024 classes (@linear_loss) is not padded.
// PAD-LABEL: func.func @padded_head
// PAD: %[[WP:.+]] = gpuc.pad %arg1 low = [0, 0] high = [58, 0] value = 0.000000e+00 : tensor<1030x3xf32> -> tensor<1088x3xf32>
// PAD: %[[Z:.+]] = gpuc.matmul %arg0, %[[WP]] transpose_rhs : (tensor<10x3xf32>, tensor<1088x3xf32>) -> tensor<10x1088xf32>
// PAD: %[[COLUMN:.+]] = gpuc.iota dim = 1 : tensor<10x1088xi64>
// PAD: %[[REAL:.+]] = gpuc.compare lt, %[[COLUMN]]
// PAD: gpuc.select %[[REAL]], %[[Z]]
// PAD: %[[DX:.+]] = gpuc.matmul %{{.+}}, %[[WP]] : (tensor<10x1088xf32>, tensor<1088x3xf32>) -> tensor<10x3xf32>
// PAD: %[[DWP:.+]] = gpuc.matmul %{{.+}}, %arg0 transpose_lhs : (tensor<10x1088xf32>, tensor<10x3xf32>) -> tensor<1088x3xf32>
// PAD: %[[DW:.+]] = gpuc.slice %[[DWP]] starts = [0, 0] limits = [1030, 3]
// PAD: return %{{.+}}, %[[DX]], %[[DW]]
func.func @padded_head(%x: tensor<10x3xf32>, %w: tensor<1030x3xf32>, %y: tensor<10xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<10x3xf32>, tensor<1030x3xf32>) {
  %l, %dx, %dw = gpuc.linear_cross_entropy_grad %x, %w, %y, %g reduction = mean : (tensor<10x3xf32>, tensor<1030x3xf32>, tensor<10xi64>, tensor<f32>) -> (tensor<f32>, tensor<10x3xf32>, tensor<1030x3xf32>)
  return %l, %dx, %dw : tensor<f32>, tensor<10x3xf32>, tensor<1030x3xf32>
}

// -----

// A language model's held-out scores run over the chunks the head's
// gradient would: each chunk's rows' losses and hits (their first largest
// logit is the label's: the largest negated column holding the row's
// maximum), labels of -1 counted in neither, into their part of two
// vectors summed at the end; with pad-classes=64 over the padded weight,
// its extra logits -inf.
// CHUNK-LABEL: func.func @token_scores
// CHUNK-SAME: gpuc.chunked_losses = [{chunk_rows = 4 : i64, classes = 12 : i64, element_bytes = 4 : i64, logits = "f32", rows = 10 : i64}]
// CHUNK: %[[X0:.+]] = gpuc.slice %arg0 starts = [0, 0] limits = [4, 3]
// CHUNK: %[[Y0:.+]] = gpuc.slice %arg2 starts = [0] limits = [4]
// CHUNK: %[[Z0:.+]] = gpuc.matmul %[[X0]], %arg1 transpose_rhs : (tensor<4x3xf32>, tensor<12x3xf32>) -> tensor<4x12xf32>
// CHUNK: %[[MAX0:.+]] = gpuc.reduce_max %[[Z0]] axes = [1] keep_dims
// CHUNK: %[[COLUMN0:.+]] = gpuc.iota dim = 1 : tensor<4x12xi64>
// CHUNK: %[[FCOLUMN0:.+]] = gpuc.cast %[[COLUMN0]] : tensor<4x12xi64> to tensor<4x12xf32>
// CHUNK: %[[NEG0:.+]] = gpuc.neg %[[FCOLUMN0]]
// CHUNK: %[[ATMAX0:.+]] = gpuc.broadcast %[[MAX0]] : tensor<4x1xf32> -> tensor<4x12xf32>
// CHUNK: %[[EQ0:.+]] = gpuc.compare eq, %[[Z0]], %[[ATMAX0]]
// CHUNK: %[[SEL0:.+]] = gpuc.select %[[EQ0]], %[[NEG0]]
// CHUNK: %[[FIRST0:.+]] = gpuc.reduce_max %[[SEL0]] axes = [1] : tensor<4x12xf32> -> tensor<4xf32>
// CHUNK: %[[LABEL0:.+]] = gpuc.cast %[[Y0]] : tensor<4xi64> to tensor<4xf32>
// CHUNK: %[[WINNER0:.+]] = gpuc.neg %[[FIRST0]]
// CHUNK: %[[HIT0:.+]] = gpuc.compare eq, %[[WINNER0]], %[[LABEL0]]
// CHUNK: %[[COUNTED0:.+]] = gpuc.compare ne, %[[Y0]]
// CHUNK: %[[VALID0:.+]] = gpuc.cast %[[COUNTED0]]
// CHUNK: %[[LOSS0:.+]] = gpuc.mul %{{.+}}, %[[VALID0]] : tensor<4xf32>
// CHUNK: %[[HITS0:.+]] = gpuc.mul %{{.+}}, %[[VALID0]] : tensor<4xf32>
// CHUNK: gpuc.slice %arg0 starts = [4, 0] limits = [8, 3]
// CHUNK: %[[LOSS1:.+]] = gpuc.mul %{{.+}} : tensor<4xf32>
// CHUNK: %[[HITS1:.+]] = gpuc.mul %{{.+}} : tensor<4xf32>
// CHUNK: gpuc.slice %arg0 starts = [8, 0] limits = [10, 3]
// CHUNK: gpuc.matmul %{{.+}}, %arg1 transpose_rhs : (tensor<2x3xf32>, tensor<12x3xf32>) -> tensor<2x12xf32>
// CHUNK: %[[LOSS2:.+]] = gpuc.mul %{{.+}} : tensor<2xf32>
// CHUNK: %[[HITS2:.+]] = gpuc.mul %{{.+}} : tensor<2xf32>
// CHUNK: %[[LOSSES:.+]] = gpuc.concat %[[LOSS0]], %[[LOSS1]], %[[LOSS2]] axis = 0
// CHUNK: %[[LOSS:.+]] = gpuc.reduce_sum %[[LOSSES]] axes = [0] : tensor<10xf32> -> tensor<f32>
// CHUNK: %[[ALLHITS:.+]] = gpuc.concat %[[HITS0]], %[[HITS1]], %[[HITS2]] axis = 0
// CHUNK: %[[HITS:.+]] = gpuc.reduce_sum %[[ALLHITS]] axes = [0] : tensor<10xf32> -> tensor<f32>
// CHUNK: return %[[LOSS]], %[[HITS]]
// PAD-LABEL: func.func @token_scores_padded
// PAD: %[[WP:.+]] = gpuc.pad %arg1 low = [0, 0] high = [58, 0] value = 0.000000e+00 : tensor<1030x3xf32> -> tensor<1088x3xf32>
// PAD: %[[Z:.+]] = gpuc.matmul %arg0, %[[WP]] transpose_rhs : (tensor<10x3xf32>, tensor<1088x3xf32>) -> tensor<10x1088xf32>
// PAD: %[[REAL:.+]] = gpuc.compare lt
// PAD: gpuc.select %[[REAL]], %[[Z]]
// PAD: return
func.func @token_scores(%x: tensor<10x3xf32>, %w: tensor<12x3xf32>, %y: tensor<10xi64>) -> (tensor<f32>, tensor<f32>) {
  %s:2 = gpuc.linear_token_scores %x, %w, %y ignore_index = -1 : (tensor<10x3xf32>, tensor<12x3xf32>, tensor<10xi64>) -> (tensor<f32>, tensor<f32>)
  return %s#0, %s#1 : tensor<f32>, tensor<f32>
}
func.func @token_scores_padded(%x: tensor<10x3xf32>, %w: tensor<1030x3xf32>, %y: tensor<10xi64>) -> (tensor<f32>, tensor<f32>) {
  %s:2 = gpuc.linear_token_scores %x, %w, %y : (tensor<10x3xf32>, tensor<1030x3xf32>, tensor<10xi64>) -> (tensor<f32>, tensor<f32>)
  return %s#0, %s#1 : tensor<f32>, tensor<f32>
}

// -----

// 16-bit logits: the GEMM stores them in bf16 and the softmax reads them
// widened to f32; their gradient is rounded to bf16 for the two GEMMs that
// read it; the weight's gradient sums the chunks in f32 (a bf16 product
// with an f32 result) and is rounded once; the loss is f32.
// CHUNK-LABEL: func.func @low_head
// CHUNK: %[[Z0:.+]] = gpuc.matmul %{{.+}}, %arg1 transpose_rhs : (tensor<4x3xbf16>, tensor<12x3xbf16>) -> tensor<4x12xbf16>
// CHUNK: gpuc.cast %[[Z0]] : tensor<4x12xbf16> to tensor<4x12xf32>
// CHUNK: %[[DZ0:.+]] = gpuc.cast %{{.+}} : tensor<4x12xf32> to tensor<4x12xbf16>
// CHUNK: gpuc.matmul %[[DZ0]], %arg1 : (tensor<4x12xbf16>, tensor<12x3xbf16>) -> tensor<4x3xbf16>
// CHUNK: %[[DW0:.+]] = gpuc.matmul %[[DZ0]], %{{.+}} transpose_lhs : (tensor<4x12xbf16>, tensor<4x3xbf16>) -> tensor<12x3xf32>
// CHUNK: %[[DW1:.+]] = gpuc.matmul %{{.+}}, %{{.+}} transpose_lhs plus %[[DW0]] : tensor<12x3xf32> : (tensor<4x12xbf16>, tensor<4x3xbf16>) -> tensor<12x3xf32>
// CHUNK: %[[DW2:.+]] = gpuc.matmul %{{.+}}, %{{.+}} transpose_lhs plus %[[DW1]] : tensor<12x3xf32> : (tensor<2x12xbf16>, tensor<2x3xbf16>) -> tensor<12x3xf32>
// CHUNK: %[[DW:.+]] = gpuc.cast %[[DW2]] : tensor<12x3xf32> to tensor<12x3xbf16>
// CHUNK: return %{{.+}}, %{{.+}}, %[[DW]] : tensor<f32>, tensor<10x3xbf16>, tensor<12x3xbf16>
func.func @low_head(%x: tensor<10x3xbf16>, %w: tensor<12x3xbf16>, %y: tensor<10xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<10x3xbf16>, tensor<12x3xbf16>) {
  %l, %dx, %dw = gpuc.linear_cross_entropy_grad %x, %w, %y, %g reduction = mean : (tensor<10x3xbf16>, tensor<12x3xbf16>, tensor<10xi64>, tensor<f32>) -> (tensor<f32>, tensor<10x3xbf16>, tensor<12x3xbf16>)
  return %l, %dx, %dw : tensor<f32>, tensor<10x3xbf16>, tensor<12x3xbf16>
}

// -----

// Rows of 1,030 f32 logits in chunks of about 6.75 MB (1,600 rows). 4,096
// rows: four equal chunks of 1,024, not 1,600 + 1,600 + 896. 4,288 rows
// (67 x 64: no equal multiples of 64 in 3 to 16 chunks): three chunks
// as even as multiples of 64 allow, 1,472 + 1,472 + 1,344.
// EVEN-LABEL: func.func @even_chunks
// EVEN: gpuc.slice %arg0 starts = [0, 0] limits = [1024, 4]
// EVEN: gpuc.slice %arg0 starts = [1024, 0] limits = [2048, 4]
// EVEN: gpuc.slice %arg0 starts = [2048, 0] limits = [3072, 4]
// EVEN: gpuc.slice %arg0 starts = [3072, 0] limits = [4096, 4]
// EVEN-NOT: gpuc.slice %arg0
// EVEN-LABEL: func.func @uneven_rows
// EVEN: gpuc.slice %arg0 starts = [0, 0] limits = [1472, 4]
// A causal attention's GEMMs in bands (4 bands of 2 rows here): the
// scores and their gradient are computed where the triangle keeps them
// (result_triangle), selected before anything reads them; the weights and
// the scores' gradient are made exactly zero in the triangle, and the
// products that read them sum only the kept terms (lhs_triangle).
// BANDS-LABEL: func.func @causal_bands
// BANDS: %[[S:.+]] = gpuc.matmul %arg0, %arg1 transpose_rhs result_triangle gt bands 4
// BANDS: %[[Z:.+]] = gpuc.mul %[[S]]
// BANDS: %[[OUT:.+]] = gpuc.compare gt
// BANDS: gpuc.select %[[OUT]], %{{.+}}, %[[Z]]
// BANDS: %[[P:.+]] = gpuc.select %{{.+}}, %[[ZERO:.+]], %{{.+}} : tensor<1x2x8x8xi1>, tensor<1x2x8x8xf32>
// BANDS: gpuc.matmul %[[P]], %arg2 lhs_triangle gt bands 4
// BANDS: gpuc.matmul %[[P]], %arg3 transpose_lhs lhs_triangle gt bands 4
// BANDS: %[[DP:.+]] = gpuc.matmul %arg3, %arg2 transpose_rhs result_triangle gt bands 4
// BANDS: gpuc.select %{{.+}}, %[[ZERO]], %[[DP]]
// BANDS: gpuc.matmul %[[DS:.+]], %arg1 lhs_triangle gt bands 4
// BANDS: gpuc.matmul %[[DS]], %arg0 transpose_lhs lhs_triangle gt bands 4
// NEGBANDS: triangle-band-rows -1 is negative
func.func @causal_bands(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %do: tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
  %o, %lse = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  return %o, %dq, %dk, %dv : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Masks the step computes from indices, as exported: Trilu's key - query
// >= 1 (chargpt), PyTorch's is_causal (ones through Trilu, compared with
// 0), and a diagonal moved by 2, which is no triangle. The first two are
// `key > query`: the flash lowering marks the triangle and drops the
// mask; the GEMMs take bands. The third stays a mask read.
// FLASH-LABEL: func.func @index_masks
// FLASH: gpuc.attention %arg0, %arg0, %arg0 scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt :
// FLASH: gpuc.attention %arg0, %arg0, %arg0 scale = 5.000000e-01 fill = -3.4028234663852886E+38 triangle gt :
// FLASH: gpuc.attention %arg0, %arg0, %arg0 mask %{{.+}} : tensor<1x1x6x6xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 :
// BANDS-LABEL: func.func @index_masks
// BANDS: transpose_rhs result_triangle gt bands 3
// BANDS: lhs_triangle gt bands 3
// BANDS: transpose_rhs result_triangle gt bands 3
// BANDS: lhs_triangle gt bands 3
// BANDS-NOT: bands
// BANDS: return
func.func @index_masks(%q: tensor<1x1x6x4xf32>) -> (tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) {
  %query = gpuc.iota dim = 0 : tensor<6x6xi64>
  %key = gpuc.iota dim = 1 : tensor<6x6xi64>
  %offset = gpuc.sub %key, %query : tensor<6x6xi64>
  %one = gpuc.constant dense<1> : tensor<6x6xi64>
  %zero = gpuc.constant dense<0> : tensor<6x6xi64>
  %two = gpuc.constant dense<2> : tensor<6x6xi64>
  %true = gpuc.constant dense<true> : tensor<6x6xi1>
  %false = gpuc.constant dense<false> : tensor<6x6xi1>
  %above = gpuc.compare ge, %offset, %one : tensor<6x6xi64>
  %trilu = gpuc.select %above, %true, %false : tensor<6x6xi1>, tensor<6x6xi1>
  %m1 = gpuc.reshape %trilu : tensor<6x6xi1> -> tensor<1x1x6x6xi1>
  %o1, %l1 = gpuc.attention %q, %q, %q mask %m1 : tensor<1x1x6x6xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32> -> tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  %lower = gpuc.compare le, %offset, %zero : tensor<6x6xi64>
  %ones = gpuc.constant dense<1.0> : tensor<6x6xf32>
  %zeros = gpuc.constant dense<0.0> : tensor<6x6xf32>
  %tril = gpuc.select %lower, %ones, %zeros : tensor<6x6xi1>, tensor<6x6xf32>
  %excluded = gpuc.compare eq, %tril, %zeros : tensor<6x6xf32>
  %m2 = gpuc.reshape %excluded : tensor<6x6xi1> -> tensor<1x1x6x6xi1>
  %o2, %l2 = gpuc.attention %q, %q, %q mask %m2 : tensor<1x1x6x6xi1> scale = 5.000000e-01 fill = -3.4028234663852886E+38 : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32> -> tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  %far = gpuc.compare ge, %offset, %two : tensor<6x6xi64>
  %m3 = gpuc.reshape %far : tensor<6x6xi1> -> tensor<1x1x6x6xi1>
  %o3, %l3 = gpuc.attention %q, %q, %q mask %m3 : tensor<1x1x6x6xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32> -> tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  return %o1, %o2, %o3 : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>
}

// -----

// A gradient lowered apart from its forward recomputes the weights from
// the scores' kept triangle, zero in the other; a keeping `le` mask as an
// operand excludes the triangle above the diagonal too.
// BANDS-LABEL: func.func @causal_bands_grad_alone
// BANDS: gpuc.matmul %arg0, %arg0 transpose_rhs result_triangle gt bands 3
// BANDS: gpuc.exp
// BANDS: %[[P:.+]] = gpuc.select
// BANDS: gpuc.matmul %[[P]], %arg3 transpose_lhs lhs_triangle gt bands 3
func.func @causal_bands_grad_alone(%q: tensor<1x1x6x4xf32>, %o: tensor<1x1x6x4xf32>, %lse: tensor<1x1x6xf32>, %do: tensor<1x1x6x4xf32>) -> (tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) {
  %m = gpuc.constant dense<[[[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]]]> : tensor<1x1x6x6xi1>
  %dq, %dk, %dv = gpuc.attention_grad %q, %q, %q, %o, %lse, %do mask %m : tensor<1x1x6x6xi1> scale = 5.000000e-01 fill = -3.000000e+38 {mask_keeps} : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  return %dq, %dk, %dv : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>
}

// -----

// Whole GEMMs: a triangle beside a padding mask (a row may keep no key),
// a fill that leaves the excluded scores a weight, a triangle without the
// diagonal (the first row keeps no key), and keys fewer than the queries.
// BANDS-LABEL: func.func @no_bands
// BANDS-NOT: bands
// BANDS: return
func.func @no_bands(%q: tensor<1x1x6x4xf32>, %pad: tensor<1x1x1x6xi1>, %k: tensor<1x1x4x4xf32>) -> (tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) {
  %o1, %l1 = gpuc.attention %q, %q, %q mask %pad : tensor<1x1x1x6xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32> -> tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  %o2, %l2 = gpuc.attention %q, %q, %q scale = 5.000000e-01 fill = -1.000000e+04 triangle gt : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32> -> tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  %o3, %l3 = gpuc.attention %q, %q, %q scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle ge : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32> -> tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  %o4, %l4 = gpuc.attention %q, %k, %k scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x1x6x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32> -> tensor<1x1x6x4xf32>, tensor<1x1x6xf32>
  return %o1, %o2, %o3, %o4 : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>
}

// -----

// EVEN: gpuc.slice %arg0 starts = [1472, 0] limits = [2944, 4]
// EVEN: gpuc.slice %arg0 starts = [2944, 0] limits = [4288, 4]
// EVEN-NOT: gpuc.slice %arg0
// EVEN: return
func.func @even_chunks(%x: tensor<4096x4xf32>, %w: tensor<1030x4xf32>, %y: tensor<4096xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<4096x4xf32>, tensor<1030x4xf32>) {
  %l, %dx, %dw = gpuc.linear_cross_entropy_grad %x, %w, %y, %g reduction = mean : (tensor<4096x4xf32>, tensor<1030x4xf32>, tensor<4096xi64>, tensor<f32>) -> (tensor<f32>, tensor<4096x4xf32>, tensor<1030x4xf32>)
  return %l, %dx, %dw : tensor<f32>, tensor<4096x4xf32>, tensor<1030x4xf32>
}
func.func @uneven_rows(%x: tensor<4288x4xf32>, %w: tensor<1030x4xf32>, %y: tensor<4288xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<4288x4xf32>, tensor<1030x4xf32>) {
  %l, %dx, %dw = gpuc.linear_cross_entropy_grad %x, %w, %y, %g reduction = mean : (tensor<4288x4xf32>, tensor<1030x4xf32>, tensor<4288xi64>, tensor<f32>) -> (tensor<f32>, tensor<4288x4xf32>, tensor<1030x4xf32>)
  return %l, %dx, %dw : tensor<f32>, tensor<4288x4xf32>, tensor<1030x4xf32>
}

// -----

// Under the flash lowering a fill far below zero loses a fully masked
// row's weights in the backward's f32 logsumexp: said once per attention.
// A causal mask keeps each row's own key, and a fill of -1e4 keeps the
// digits: no warning for those.
// LOSTWEIGHTS-NOT: warning
// LOSTWEIGHTS: warning: masks scores with a fill of -3.402823e+38: under the flash lowering a query row whose mask excludes every key gets wrong gradients
// LOSTWEIGHTS-NOT: warning
// FLASH-LABEL: func.func @lowest_float_fill
func.func @lowest_float_fill(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>, %m: tensor<1x1x1x3xi1>) -> (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) {
  %o, %lse = gpuc.attention %q, %k, %v mask %m : tensor<1x1x1x3xi1> scale = 5.000000e-01 fill = -3.4028234663852886E+38 : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>, tensor<1x2x3xf32>
  %causal = gpuc.constant dense<[[[[false, true, true], [false, false, true], [false, false, false]]]]> : tensor<1x1x3x3xi1>
  %c, %clse = gpuc.attention %q, %k, %v mask %causal : tensor<1x1x3x3xi1> scale = 5.000000e-01 fill = -3.4028234663852886E+38 : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>, tensor<1x2x3xf32>
  %s, %slse = gpuc.attention %q, %k, %v mask %m : tensor<1x1x1x3xi1> scale = 5.000000e-01 fill = -1.000000e+04 : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>, tensor<1x2x3xf32>
  return %o, %c, %s : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>
}
