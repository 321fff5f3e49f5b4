// A --dump-dir file: its weight and its large constant print as
// dense_resource<__elided__>, a type without values.
gpuc.parameter @w trainable : tensor<2x2xf32> = dense_resource<__elided__> : tensor<2x2xf32>
func.func @forward(%x: tensor<2x2xf32> {gpuc.input = "x"}, %w: tensor<2x2xf32> {gpuc.param = @w}) -> (tensor<2x2xf32> {gpuc.output = "y"}) {
  %c = gpuc.constant dense_resource<__elided__> : tensor<2x2xf32>
  %p = gpuc.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %y = gpuc.add %p, %c : tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
