// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-accumulate-gradients=steps=2

gpuc.parameter @w trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
// expected-error @+1 {{@train_step has no gradients to accumulate}}
func.func @train_step(%w: tensor<3xf32> {gpuc.param = @w}, %l: tensor<f32> {gpuc.input = "l"}) -> (tensor<f32> {gpuc.output = "loss"}) {
  return %l : tensor<f32>
}

// -----

gpuc.parameter @w trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
// expected-error @+1 {{the module already has an @apply_update}}
func.func @train_step(%w: tensor<3xf32> {gpuc.param = @w}, %g: tensor<3xf32> {gpuc.input = "g"}) -> (tensor<3xf32> {gpuc.grad = @w}) {
  return %g : tensor<3xf32>
}
func.func @apply_update() {
  return
}
