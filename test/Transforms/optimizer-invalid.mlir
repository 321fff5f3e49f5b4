// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-optimizer="kind=lamb"

gpuc.parameter @w trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
// expected-error @+1 {{unknown optimizer 'lamb'; the optimizers are sgd, adam and adamw}}
func.func @train_step(%w: tensor<3xf32> {gpuc.param = @w}, %g: tensor<3xf32> {gpuc.input = "g"}) -> (tensor<3xf32> {gpuc.grad = @w}) {
  return %g : tensor<3xf32>
}

