// RUN: gpuc-opt %s --split-input-file --gpuc-mask-pooled-gradients | FileCheck %s

// A ReLU's gradient mask after max pooling's gradient masks the pooled
// gradient with the pooled maximum: backward no longer reads x.
// CHECK-LABEL: func.func @relu_mask_before_max_pool_gradient
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x8x4xf32>, %[[DY:[a-z0-9]+]]: tensor<2x4x4x4xf32>
// CHECK: %[[P:.+]] = gpuc.max_pool2d %[[X]]
// CHECK: %[[I:.+]] = gpuc.max_pool2d_argmax %[[X]]
// CHECK: %[[POS:.+]] = gpuc.compare gt, %[[P]], %{{.+}} : tensor<2x4x4x4xf32>
// CHECK: %[[M:.+]] = gpuc.select %[[POS]], %[[DY]], %{{.+}} : tensor<2x4x4x4xi1>, tensor<2x4x4x4xf32>
// CHECK: %[[DX:.+]] = gpuc.max_pool2d_backward %[[I]], %[[M]] kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last
// CHECK-NOT: gpuc.compare
// CHECK: return %[[P]], %[[DX]]
func.func @relu_mask_before_max_pool_gradient(%x: tensor<2x8x8x4xf32>, %dy: tensor<2x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>) {
  %p = gpuc.max_pool2d %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xf32>
  %i = gpuc.max_pool2d_argmax %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xi8>
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x4x4x4xi8>, tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
  %zero = gpuc.constant dense<0.0> : tensor<2x8x8x4xf32>
  %pos = gpuc.compare gt, %x, %zero : tensor<2x8x8x4xf32>
  %dx = gpuc.select %pos, %g, %zero : tensor<2x8x8x4xi1>, tensor<2x8x8x4xf32>
  return %p, %dx : tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>
}

// -----

// Without the pooled maximum at hand, or where the gradient is not 0 off
// the mask, the mask stays where it is.
// CHECK-LABEL: func.func @relu_mask_without_pooled_value
// CHECK: gpuc.max_pool2d_backward
// CHECK: gpuc.compare gt, %arg0
// CHECK: gpuc.select
// CHECK-LABEL: func.func @mask_with_nonzero_otherwise
// CHECK: gpuc.max_pool2d_backward
// CHECK: gpuc.compare gt, %arg0
// CHECK: gpuc.select
func.func @relu_mask_without_pooled_value(%x: tensor<2x8x8x4xf32>, %dy: tensor<2x4x4x4xf32>) -> tensor<2x8x8x4xf32> {
  %i = gpuc.max_pool2d_argmax %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xi8>
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x4x4x4xi8>, tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
  %zero = gpuc.constant dense<0.0> : tensor<2x8x8x4xf32>
  %pos = gpuc.compare gt, %x, %zero : tensor<2x8x8x4xf32>
  %dx = gpuc.select %pos, %g, %zero : tensor<2x8x8x4xi1>, tensor<2x8x8x4xf32>
  return %dx : tensor<2x8x8x4xf32>
}
func.func @mask_with_nonzero_otherwise(%x: tensor<2x8x8x4xf32>, %dy: tensor<2x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>) {
  %p = gpuc.max_pool2d %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xf32>
  %i = gpuc.max_pool2d_argmax %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xi8>
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x4x4x4xi8>, tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
  %one = gpuc.constant dense<1.0> : tensor<2x8x8x4xf32>
  %zero = gpuc.constant dense<0.0> : tensor<2x8x8x4xf32>
  %pos = gpuc.compare gt, %x, %zero : tensor<2x8x8x4xf32>
  %dx = gpuc.select %pos, %g, %one : tensor<2x8x8x4xi1>, tensor<2x8x8x4xf32>
  return %p, %dx : tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>
}

// -----

// Any comparison with a constant holds of the pooled value where it holds
// of x at the window's maximum.
// CHECK-LABEL: func.func @mask_with_other_threshold
// CHECK: %[[P:.+]] = gpuc.max_pool2d %arg0
// CHECK: %[[C:.+]] = gpuc.compare le, %[[P]], %{{.+}} : tensor<2x4x4x4xf32>
// CHECK: %[[M:.+]] = gpuc.select %[[C]], %arg1
// CHECK: gpuc.max_pool2d_backward %{{.+}}, %[[M]]
// CHECK-NOT: gpuc.compare
// CHECK: return
func.func @mask_with_other_threshold(%x: tensor<2x8x8x4xf32>, %dy: tensor<2x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>) {
  %p = gpuc.max_pool2d %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xf32>
  %i = gpuc.max_pool2d_argmax %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xi8>
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x4x4x4xi8>, tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
  %six = gpuc.constant dense<6.0> : tensor<2x8x8x4xf32>
  %zero = gpuc.constant dense<0.0> : tensor<2x8x8x4xf32>
  %c = gpuc.compare le, %x, %six : tensor<2x8x8x4xf32>
  %dx = gpuc.select %c, %g, %zero : tensor<2x8x8x4xi1>, tensor<2x8x8x4xf32>
  return %p, %dx : tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>
}
