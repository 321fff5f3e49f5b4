// RUN: gpuc-opt %s --gpuc-decompose -split-input-file | FileCheck %s

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

// CHECK-LABEL: func.func @cross_entropy
// CHECK: %[[N:.+]] = gpuc.constant dense<4.000000e+00> : tensor<f32>
// CHECK: gpuc.reduce_max
// CHECK: gpuc.log
// CHECK: %[[CLASSES:.+]] = gpuc.iota dim = 1 : tensor<4x10xi64>
// CHECK: %[[HOT:.+]] = gpuc.compare eq, %[[CLASSES]]
// CHECK: gpuc.cast %[[HOT]] : tensor<4x10xi1> to tensor<4x10xf32>
// CHECK: %[[PICK:.+]] = gpuc.reduce_sum %{{.+}} axes = [1] : tensor<4x10xf32> -> tensor<4xf32>
// CHECK: %[[NEG:.+]] = gpuc.neg %[[PICK]]
// CHECK: %[[TOTAL:.+]] = gpuc.reduce_sum %[[NEG]] axes = [0]
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

// CHECK-LABEL: func.func @mse
// CHECK: %[[D:.+]] = gpuc.sub %arg0, %arg1
// CHECK: %[[SQ:.+]] = gpuc.mul %[[D]], %[[D]]
// CHECK: gpuc.reduce_sum %[[SQ]] axes = [0, 1] : tensor<4x3xf32> -> tensor<f32>
func.func @mse(%x: tensor<4x3xf32>, %t: tensor<4x3xf32>) -> tensor<f32> {
  %y = gpuc.mse_loss %x, %t reduction = sum : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// scatter_add: a masked sum over the indices (axis 2 of [outer, V, n, inner]),
// negative indices wrapped as in gather.
// CHECK-LABEL: func.func @scatter_add
// CHECK-DAG: %[[IDS:.+]] = gpuc.reshape %arg1 : tensor<2x3xi64> -> tensor<1x1x6x1xi64>
// CHECK-DAG: %[[ZERO:.+]] = gpuc.constant dense<0> : tensor<1x1x6x1xi64>
// CHECK-DAG: %[[FIVE:.+]] = gpuc.constant dense<5> : tensor<1x1x6x1xi64>
// CHECK: %[[NEG:.+]] = gpuc.compare lt, %[[IDS]], %[[ZERO]]
// CHECK: %[[UP:.+]] = gpuc.add %[[IDS]], %[[FIVE]]
// CHECK: %[[WRAPPED:.+]] = gpuc.select %[[NEG]], %[[UP]], %[[IDS]]
// CHECK: %[[TARGET:.+]] = gpuc.broadcast %[[WRAPPED]] : tensor<1x1x6x1xi64> -> tensor<1x5x6x4xi64>
// CHECK: %[[ROW:.+]] = gpuc.iota dim = 1 : tensor<1x5x6x4xi64>
// CHECK: %[[HIT:.+]] = gpuc.compare eq, %[[ROW]], %[[TARGET]]
// CHECK: %[[U:.+]] = gpuc.reshape %arg0 : tensor<2x3x4xf32> -> tensor<1x1x6x4xf32>
// CHECK: %[[UB:.+]] = gpuc.broadcast %[[U]] : tensor<1x1x6x4xf32> -> tensor<1x5x6x4xf32>
// CHECK: %[[MASKED:.+]] = gpuc.select %[[HIT]], %[[UB]], %{{.+}}
// CHECK: %[[SUM:.+]] = gpuc.reduce_sum %[[MASKED]] axes = [2] : tensor<1x5x6x4xf32> -> tensor<1x5x4xf32>
// CHECK: gpuc.reshape %[[SUM]] : tensor<1x5x4xf32> -> tensor<5x4xf32>
// CHECK-NOT: gpuc.scatter_add
func.func @scatter_add(%u: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>) -> tensor<5x4xf32> {
  %g = gpuc.scatter_add %u, %ids axis = 0 : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<5x4xf32>
  return %g : tensor<5x4xf32>
}

// -----

// Along an inner axis: outer 2, inner 1.
// CHECK-LABEL: func.func @scatter_add_axis1
// CHECK: gpuc.reduce_sum %{{.+}} axes = [2] : tensor<2x3x4x1xf32> -> tensor<2x3x1xf32>
// CHECK: gpuc.reshape %{{.+}} : tensor<2x3x1xf32> -> tensor<2x3xf32>
func.func @scatter_add_axis1(%u: tensor<2x4xf32>, %ids: tensor<4xi64>) -> tensor<2x3xf32> {
  %g = gpuc.scatter_add %u, %ids axis = 1 : (tensor<2x4xf32>, tensor<4xi64>) -> tensor<2x3xf32>
  return %g : tensor<2x3xf32>
}
