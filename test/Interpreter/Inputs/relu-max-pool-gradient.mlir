// A ReLU's gradient mask after max pooling's gradient over overlapping
// windows (3x3, stride 2, padding 1, as ResNet's stem), with the pooled
// value computed beside the positions, as autodiff leaves them.
func.func @forward(%x: tensor<2x9x9x3xf32> {gpuc.input = "x"}, %dy: tensor<2x5x5x3xf32> {gpuc.input = "dy"}) -> (tensor<2x5x5x3xf32> {gpuc.output = "p"}, tensor<2x9x9x3xf32> {gpuc.output = "dx"}) {
  %p = gpuc.max_pool2d %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x9x9x3xf32> -> tensor<2x5x5x3xf32>
  %i = gpuc.max_pool2d_argmax %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x9x9x3xf32> -> tensor<2x5x5x3xi8>
  %g = gpuc.max_pool2d_backward %i, %dy kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x5x5x3xi8>, tensor<2x5x5x3xf32> -> tensor<2x9x9x3xf32>
  %zero = gpuc.constant dense<0.0> : tensor<2x9x9x3xf32>
  %pos = gpuc.compare gt, %x, %zero : tensor<2x9x9x3xf32>
  %zero2 = gpuc.constant dense<0.0> : tensor<2x9x9x3xf32>
  %dx = gpuc.select %pos, %g, %zero2 : tensor<2x9x9x3xi1>, tensor<2x9x9x3xf32>
  return %p, %dx : tensor<2x5x5x3xf32>, tensor<2x9x9x3xf32>
}
