// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-accumulate-gradients=steps=0

gpuc.parameter @w trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
// expected-error @+1 {{steps must be at least 1, not 0}}
func.func @train_step(%w: tensor<3xf32> {gpuc.param = @w}, %g: tensor<3xf32> {gpuc.input = "g"}) -> (tensor<3xf32> {gpuc.grad = @w}) {
  return %g : tensor<3xf32>
}

// -----

// expected-error @+1 {{gpuc-accumulate-gradients: the module has no @train_step}}
module {
  func.func @forward() {
    return
  }
}
