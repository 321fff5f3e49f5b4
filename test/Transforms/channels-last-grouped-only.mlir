// RUN: gpuc-opt %s --gpuc-channels-last=grouped-only --canonicalize --cse -split-input-file | FileCheck %s

// With grouped-only (the CPU's --conv-layout auto), a model whose
// convolutions are all dense keeps NCHW: nothing is transposed.
// CHECK-LABEL: func.func @dense_only
// CHECK-NOT: gpuc.transpose
// CHECK-NOT: channels_last
// CHECK: gpuc.conv2d %arg0, %arg1 {{.*}} groups = 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NOT: channels_last
func.func @dense_only(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %r = gpuc.relu %y : tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}

// -----

// One depthwise convolution makes every convolution of the model channels
// last, the dense one before it too, with no transpose between them.
// CHECK-LABEL: func.func @with_depthwise
// CHECK: gpuc.conv2d {{.*}} groups = 1 channels_last : (tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.conv2d {{.*}} groups = 4 channels_last : (tensor<2x8x8x4xf32>, tensor<4x3x3x1xf32>) -> tensor<2x8x8x4xf32>
// CHECK: gpuc.transpose %{{.+}} perm = [0, 3, 1, 2] : tensor<2x8x8x4xf32> -> tensor<2x4x8x8xf32>
func.func @with_depthwise(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %dw: tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %r = gpuc.relu %y : tensor<2x4x8x8xf32>
  %z = gpuc.conv2d %r, %dw strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 4 : (tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %z : tensor<2x4x8x8xf32>
}
