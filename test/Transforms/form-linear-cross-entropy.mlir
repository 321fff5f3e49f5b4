// RUN: gpuc-opt %s --gpuc-form-linear-cross-entropy -split-input-file | FileCheck %s

// A language model's head as exported: the product, the logits reshaped to
// [B, T, V] for the model's output and back to rows for the loss. The pair
// becomes one op, and the logits stop being an output.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {gpuc.output = "loss"})
// CHECK: %[[L:.+]] = gpuc.linear_cross_entropy %arg0, %arg1, %arg2 reduction = mean : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK-NOT: gpuc.matmul
// CHECK-NOT: gpuc.cross_entropy
// CHECK: return %[[L]]
gpuc.parameter @w trainable : tensor<16x4xf32> = dense<0.0> : tensor<16x4xf32>
func.func @forward(%h: tensor<8x4xf32> {gpuc.input = "h"}, %w: tensor<16x4xf32> {gpuc.param = @w}, %y: tensor<8xi64> {gpuc.input = "label"}) -> (tensor<2x4x16xf32> {gpuc.output = "logits"}, tensor<f32> {gpuc.output = "loss"}) {
  %z = gpuc.matmul %h, %w transpose_rhs : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %out = gpuc.reshape %z : tensor<8x16xf32> -> tensor<2x4x16xf32>
  %l = gpuc.cross_entropy %z, %y reduction = mean : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return %out, %l : tensor<2x4x16xf32>, tensor<f32>
}

// -----

// A bias broadcast over [B, T, V], a weight stored [C, V] (transposed for
// the op), and an ignored label.
// CHECK-LABEL: func.func @forward
// CHECK: %[[WT:.+]] = gpuc.transpose %arg1 perm = [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
// CHECK: gpuc.linear_cross_entropy %arg0, %[[WT]], %arg3 bias %arg2 : tensor<16xf32> reduction = sum ignore_index = -100
gpuc.parameter @w trainable : tensor<4x16xf32> = dense<0.0> : tensor<4x16xf32>
gpuc.parameter @b trainable : tensor<16xf32> = dense<0.0> : tensor<16xf32>
func.func @forward(%h: tensor<8x4xf32> {gpuc.input = "h"}, %w: tensor<4x16xf32> {gpuc.param = @w}, %b: tensor<16xf32> {gpuc.param = @b}, %y: tensor<8xi64> {gpuc.input = "label"}) -> (tensor<2x4x16xf32> {gpuc.output = "logits"}, tensor<f32> {gpuc.output = "loss"}) {
  %z = gpuc.matmul %h, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %r = gpuc.reshape %z : tensor<8x16xf32> -> tensor<2x4x16xf32>
  %bb = gpuc.broadcast %b : tensor<16xf32> -> tensor<2x4x16xf32>
  %out = gpuc.add %bb, %r : tensor<2x4x16xf32>
  %rows = gpuc.reshape %out : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %l = gpuc.cross_entropy %rows, %y reduction = sum ignore_index = -100 : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return %out, %l : tensor<2x4x16xf32>, tensor<f32>
}

// -----

// Logits read by something else (here a softmax the model returns) are
// needed whole: the chain stays.
// CHECK-LABEL: func.func @forward
// CHECK: gpuc.matmul
// CHECK: gpuc.cross_entropy
// CHECK-NOT: gpuc.linear_cross_entropy
gpuc.parameter @w trainable : tensor<16x4xf32> = dense<0.0> : tensor<16x4xf32>
func.func @forward(%h: tensor<8x4xf32> {gpuc.input = "h"}, %w: tensor<16x4xf32> {gpuc.param = @w}, %y: tensor<8xi64> {gpuc.input = "label"}) -> (tensor<8x16xf32> {gpuc.output = "probs"}, tensor<f32> {gpuc.output = "loss"}) {
  %z = gpuc.matmul %h, %w transpose_rhs : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %p = gpuc.softmax %z axis = 1 : tensor<8x16xf32>
  %l = gpuc.cross_entropy %z, %y reduction = mean : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return %p, %l : tensor<8x16xf32>, tensor<f32>
}

// -----

// A classifier: 3 classes from 4 features. Its logits are no wider than the
// rows it reads; the chain stays.
// CHECK-LABEL: func.func @forward
// CHECK: gpuc.cross_entropy
// CHECK-NOT: gpuc.linear_cross_entropy
gpuc.parameter @w trainable : tensor<3x4xf32> = dense<0.0> : tensor<3x4xf32>
func.func @forward(%h: tensor<8x4xf32> {gpuc.input = "h"}, %w: tensor<3x4xf32> {gpuc.param = @w}, %y: tensor<8xi64> {gpuc.input = "label"}) -> (tensor<8x3xf32> {gpuc.output = "logits"}, tensor<f32> {gpuc.output = "loss"}) {
  %z = gpuc.matmul %h, %w transpose_rhs : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %l = gpuc.cross_entropy %z, %y reduction = mean : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  return %z, %l : tensor<8x3xf32>, tensor<f32>
}
