// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-data-parallel

gpuc.parameter @w trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
// expected-error @+1 {{@train_step has no computed gradients to sum over the ranks}}
func.func @train_step(%w: tensor<3xf32> {gpuc.param = @w}, %l: tensor<f32> {gpuc.input = "l"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<3xf32> {gpuc.grad = @w}) {
  %zero = gpuc.constant dense<0.0> : tensor<3xf32>
  return %l, %zero : tensor<f32>, tensor<3xf32>
}

// -----

gpuc.parameter @w trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
// expected-error @+1 {{@train_step already sums its gradients over the ranks}}
func.func @train_step(%w: tensor<3xf32> {gpuc.param = @w}, %g: tensor<3xf32> {gpuc.input = "g"}) -> (tensor<3xf32> {gpuc.grad = @w}) attributes {gpuc.data_parallel = {buckets = 1 : i64}} {
  return %g : tensor<3xf32>
}

// -----

// expected-error @+1 {{gpuc-data-parallel: the module has no @train_step}}
module {
  func.func @forward() {
    return
  }
}
