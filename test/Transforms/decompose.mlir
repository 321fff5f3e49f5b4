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
