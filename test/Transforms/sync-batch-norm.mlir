// RUN: gpuc-opt %s --split-input-file --gpuc-sync-batch-norm | FileCheck %s
// RUN: gpuc-opt %s --split-input-file --gpuc-sync-batch-norm --gpuc-autodiff | FileCheck %s --check-prefix=GRAD

// Every batch norm of @forward is marked; its gradient then takes the means
// of its terms over the ranks (one all-reduce of both sums and the count),
// besides the statistics'.
gpuc.parameter @g trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
gpuc.parameter @b trainable : tensor<2xf32> = dense<0.0> : tensor<2xf32>
gpuc.parameter @w trainable : tensor<4x2x3x3xf32> = dense<2.0> : tensor<4x2x3x3xf32>
// CHECK-LABEL: func.func @forward
// CHECK: gpuc.batch_norm_train {{.+}} sync_ranks
// GRAD-LABEL: func.func @train_step
// GRAD-COUNT-2: gpuc.all_reduce %{{.+}}, %{{.+}} bucket = {{[0-9]}} : tensor<1x2x1x1xf32>, tensor<f32>
// GRAD: gpuc.all_reduce %{{.+}}, %{{.+}}, %{{.+}} bucket = 2 : tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<f32>
func.func @forward(%x: tensor<4x2x3x3xf32> {gpuc.input = "x"}, %g: tensor<2xf32> {gpuc.param = @g}, %b: tensor<2xf32> {gpuc.param = @b}, %w: tensor<4x2x3x3xf32> {gpuc.param = @w}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %xw = gpuc.mul %x, %w : tensor<4x2x3x3xf32>
  %rm = gpuc.constant dense<0.0> : tensor<2xf32>
  %rv = gpuc.constant dense<1.0> : tensor<2xf32>
  %y, %m, %v = gpuc.batch_norm_train %xw, %g, %b, %rm, %rv epsilon = 1.0e-05 momentum = 9.0e-01 : tensor<4x2x3x3xf32>, tensor<2xf32>
  %sq = gpuc.mul %y, %y : tensor<4x2x3x3xf32>
  %l = gpuc.reduce_sum %sq axes = [0, 1, 2, 3] : tensor<4x2x3x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

