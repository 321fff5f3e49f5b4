// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-amp-weight-copies

// One weight cast to two 16-bit types has no single copy.
gpuc.parameter @w trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
func.func @train_step(%w: tensor<2xf32> {gpuc.param = @w}) -> (tensor<2xf16> {gpuc.output = "a"}, tensor<2xbf16> {gpuc.output = "b"}) {
  %a = gpuc.cast %w : tensor<2xf32> to tensor<2xf16>
  // expected-error @+1 {{casts @w to two 16-bit types; one weight copy serves one}}
  %b = gpuc.cast %w : tensor<2xf32> to tensor<2xbf16>
  return %a, %b : tensor<2xf16>, tensor<2xbf16>
}

// -----

// The copy's name is taken.
// expected-error @+1 {{needs a 16-bit copy named @w.f16, which the module already has}}
gpuc.parameter @w trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
gpuc.parameter @w.f16 : tensor<2xf32> = dense<1.0> : tensor<2xf32>
func.func @train_step(%w: tensor<2xf32> {gpuc.param = @w}) -> (tensor<2xf16> {gpuc.output = "a"}) {
  %a = gpuc.cast %w : tensor<2xf32> to tensor<2xf16>
  return %a : tensor<2xf16>
}
