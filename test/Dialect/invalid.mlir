// RUN: gpuc-opt %s -split-input-file -verify-diagnostics

func.func @add_shapes(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = "gpuc.add"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dynamic(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = gpuc.relu %a : tensor<?x3xf32>
  return
}

// -----

func.func @reduce_axes(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axes must be sorted and unique}}
  %0 = gpuc.reduce_sum %a axes = [1, 0] : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape 3 does not match the expected 2}}
  %0 = gpuc.reduce_mean %a axes = [1] : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @reshape_size(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape 2x3 (6 elements) into 7 (7 elements)}}
  %0 = gpuc.reshape %a : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{perm is not a permutation of 0..1}}
  %0 = gpuc.transpose %a perm = [0, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast 2x3 to 4x3}}
  %0 = gpuc.broadcast %a : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @slice_range(%a: tensor<4xf32>) {
  // expected-error @+1 {{slice [2, 5) of axis 0 is outside 0..4}}
  %0 = gpuc.slice %a starts = [2] limits = [5] strides = [1] : tensor<4xf32> -> tensor<3xf32>
  return
}

// -----

func.func @concat(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{inputs differ in dimension 0 (2x3 vs 3x3)}}
  %0 = gpuc.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @gather(%a: tensor<5x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{result shape 2x5 does not match the expected 2x3}}
  %0 = gpuc.gather %a[%i] axis = 0 : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{contracting dimensions differ: 3 vs 4}}
  %0 = gpuc.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_perm_not_a_permutation(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) {
  // expected-error @+1 {{perm is not a permutation of 0..2}}
  %0 = gpuc.matmul %a, %b lhs_perm = [0, 0, 1] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @matmul_layout_shape(%a: tensor<3x2x4xf32>, %b: tensor<2x4x5xf32>) {
  // expected-error @+1 {{result shape 2x3x5 does not match the expected 3x2x5}}
  %0 = gpuc.matmul %a, %b lhs_perm = [1, 0, 2] result_perm = [1, 0, 2] : (tensor<3x2x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @matmul_layout_not_contiguous(%a: tensor<4x5x6xf32>, %b: tensor<6x5x7xf32>) {
  // expected-error @+1 {{layouts leave no matrix dimension contiguous}}
  %0 = gpuc.matmul %a, %b lhs_perm = [2, 0, 1] : (tensor<4x5x6xf32>, tensor<6x5x7xf32>) -> tensor<6x4x7xf32>
  return
}

// -----

func.func @matmul_layout_three_levels(%a: tensor<3x2x4x5x6xf32>, %b: tensor<2x3x4x6x7xf32>) {
  // expected-error @+1 {{layouts leave 3 batch levels; a GEMM call takes at most two}}
  %0 = gpuc.matmul %a, %b lhs_perm = [1, 0, 2, 3, 4] : (tensor<3x2x4x5x6xf32>, tensor<2x3x4x6x7xf32>) -> tensor<2x3x4x5x7xf32>
  return
}

// -----

func.func @matmul_bands_without_triangle(%a: tensor<8x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{is cut into bands but has no triangle}}
  %0 = gpuc.matmul %a, %b bands 2 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @matmul_two_triangles(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) {
  // expected-error @+1 {{has a triangle on both its lhs and its result}}
  %0 = gpuc.matmul %a, %b lhs_triangle gt result_triangle gt bands 2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @matmul_triangle_with_diagonal(%a: tensor<8x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{has a triangle 'ge'; a triangle is gt or lt}}
  %0 = gpuc.matmul %a, %b lhs_triangle ge bands 2 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @matmul_triangle_with_layout(%q: tensor<2x8x3x4xf32>) {
  // expected-error @+1 {{has a triangle on its result, which has a layout}}
  %0 = gpuc.matmul %q, %q transpose_rhs lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] result_perm = [0, 2, 1, 3] result_triangle gt bands 2 : (tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>) -> tensor<2x8x3x8xf32>
  return
}

// -----

func.func @matmul_triangle_not_square(%a: tensor<8x6xf32>, %b: tensor<6x4xf32>) {
  // expected-error @+1 {{has a triangle on its lhs, whose matrix is not square}}
  %0 = gpuc.matmul %a, %b lhs_triangle gt bands 2 : (tensor<8x6xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @matmul_triangle_accumulates(%a: tensor<8x8xf32>, %b: tensor<8x4xf32>, %c: tensor<8x4xf32>) {
  // expected-error @+1 {{has a triangle and accumulates or adds a bias}}
  %0 = gpuc.matmul %a, %b plus %c : tensor<8x4xf32> lhs_triangle gt bands 2 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @matmul_triangle_bands(%a: tensor<8x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{has a triangle but not 2 to 8 bands of its product's rows}}
  %0 = gpuc.matmul %a, %b transpose_lhs lhs_triangle lt bands 9 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @matmul_mixed_operands(%a: tensor<2x3xbf16>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{operands have element types 'bf16' and 'f32'}}
  %0 = gpuc.matmul %a, %b : (tensor<2x3xbf16>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_narrow_result(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{result element type 'bf16' is neither the operands' ('f32') nor f32 for f16/bf16 operands}}
  %0 = gpuc.matmul %a, %b : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xbf16>
  return
}

// -----

func.func @matmul_mixed_accumulator(%a: tensor<2x3xbf16>, %b: tensor<3x5xbf16>, %c: tensor<2x5xbf16>) {
  // expected-error @+1 {{accumulates into 'tensor<2x5xbf16>' but its result is 'tensor<2x5xf32>'}}
  %0 = gpuc.matmul %a, %b plus %c : tensor<2x5xbf16> : (tensor<2x3xbf16>, tensor<3x5xbf16>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_bias_not_over_columns(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{bias 'tensor<2xf32>' is not a vector over the result's last dimension of its element type ('tensor<2x5xf32>')}}
  %0 = gpuc.matmul %a, %b bias %c : tensor<2xf32> : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_bias_type(%a: tensor<2x3xbf16>, %b: tensor<3x5xbf16>, %c: tensor<5xf32>) {
  // expected-error @+1 {{bias 'tensor<5xf32>' is not a vector over the result's last dimension of its element type ('tensor<2x5xbf16>')}}
  %0 = gpuc.matmul %a, %b bias %c : tensor<5xf32> : (tensor<2x3xbf16>, tensor<3x5xbf16>) -> tensor<2x5xbf16>
  return
}

// -----

func.func @matmul_window_past_row(%a: tensor<2x5x24xf32>, %b: tensor<2x8x3xf32>) {
  // expected-error @+1 {{lhs window #gpuc.columns<offset = 20, shape = [8]> reads past the rows of 'tensor<2x5x24xf32>'}}
  %0 = gpuc.matmul %a, %b lhs_window = <offset = 20, shape = [8]> : (tensor<2x5x24xf32>, tensor<2x8x3xf32>) -> tensor<2x5x3xf32>
  return
}

// -----

func.func @matmul_window_shape(%a: tensor<2x5x24xf32>, %b: tensor<2x8x3xf32>) {
  // expected-error @+1 {{a column window's shape has dimensions of at least 1, not [0, 8]}}
  %0 = gpuc.matmul %a, %b lhs_window = <offset = 0, shape = [0, 8]> : (tensor<2x5x24xf32>, tensor<2x8x3xf32>) -> tensor<2x5x3xf32>
  return
}

// -----

func.func @matmul_window_offset(%a: tensor<2x5x24xf32>, %b: tensor<2x8x3xf32>) {
  // expected-error @+1 {{a column window starts at column 0 or later, not -8}}
  %0 = gpuc.matmul %a, %b lhs_window = <offset = -8, shape = [8]> : (tensor<2x5x24xf32>, tensor<2x8x3xf32>) -> tensor<2x5x3xf32>
  return
}

// -----

// The product reads the window's shape: [2, 5, 2, 4], not rank 3.
func.func @matmul_window_reads_wrong_shape(%a: tensor<2x5x24xf32>, %b: tensor<2x8x3xf32>) {
  // expected-error @+1 {{operands must have the same rank >= 2, got 2x5x2x4 and 2x8x3}}
  %0 = gpuc.matmul %a, %b lhs_window = <offset = 0, shape = [2, 4]> : (tensor<2x5x24xf32>, tensor<2x8x3xf32>) -> tensor<2x5x3xf32>
  return
}

// -----

func.func @matmul_bias_accumulates(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<5xf32>, %d: tensor<2x5xf32>) {
  // expected-error @+1 {{adds a bias to a result that accumulates or has a layout}}
  %0 = gpuc.matmul %a, %b plus %d : tensor<2x5xf32> bias %c : tensor<5xf32> : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{filter expects 2 input channels, input has 3}}
  %0 = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @pool(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{padding must be smaller than the kernel}}
  %0 = gpuc.max_pool2d %x kernel = [2, 2] strides = [2, 2] pads = [2, 2, 2, 2] : tensor<1x3x8x8xf32> -> tensor<1x3x6x6xf32>
  return
}

// -----

func.func @pad(%x: tensor<3xf32>) {
  // expected-error @+1 {{result shape 6 does not match the expected 5}}
  %0 = gpuc.pad %x low = [1] high = [1] value = 0.0 : tensor<3xf32> -> tensor<6xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = gpuc.softmax %x axis = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @dropout(%x: tensor<2x3xf32>, %key: tensor<2xi64>) {
  // expected-error @+1 {{ratio 1.000000e+00 must be in [0, 1)}}
  %0 = gpuc.dropout %x, %key stream = 0 ratio = 1.0 : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm(%x: tensor<2x3xf32>, %g: tensor<2xf32>) {
  // expected-error @+1 {{scale and bias must have the normalized shape 3, got 2}}
  %0 = gpuc.layer_norm %x, %g, %g axis = 1 epsilon = 1.0e-5 : tensor<2x3xf32>, tensor<2xf32>
  return
}

// -----

func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{must have shape 3 (the channel count), got 4}}
  %y, %m, %v = gpuc.batch_norm_train %x, %g, %g, %g, %g epsilon = 1.0e-5 momentum = 0.9 : tensor<2x3x4x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @labels(%x: tensor<2x3xf32>, %l: tensor<3xi64>) {
  // expected-error @+1 {{labels must have shape 2, got 3}}
  %0 = gpuc.cross_entropy %x, %l reduction = mean : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape 2x3 does not match the expected scalar}}
  %0 = gpuc.mse_loss %x, %x reduction = mean : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cast(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = gpuc.cast %x : tensor<2x3xf32> to tensor<6xf16>
  return
}

// -----

func.func @select(%c: tensor<3xi1>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = gpuc.select %c, %x, %x : tensor<3xi1>, tensor<2x3xf32>
  return
}

// -----

// expected-error @+1 {{initial value has type 'tensor<3xf32>' but the parameter is 'tensor<4xf32>'}}
gpuc.parameter @p : tensor<4xf32> = dense<0.0> : tensor<3xf32>

// -----

gpuc.parameter @q : tensor<4xf32> = dense<0.0> : tensor<4xf32>
// expected-error @+1 {{'gpuc.param' @q has type 'tensor<4xf32>' but the value has type 'tensor<3xf32>'}}
func.func @param_type(%x: tensor<3xf32> {gpuc.param = @q}) {
  return
}

// -----

// expected-error @+1 {{'gpuc.param' refers to @missing, which is not a gpuc.parameter of this module}}
func.func @param_missing(%x: tensor<3xf32> {gpuc.param = @missing}) {
  return
}

// -----

func.func @dropout_stream(%x: tensor<2x3xf32>, %key: tensor<2xi64>) {
  // expected-error @+1 {{stream must be non-negative}}
  %0 = gpuc.dropout %x, %key stream = -1 ratio = 0.5 : tensor<2x3xf32>
  return
}

// -----

func.func @dropout_key(%x: tensor<2x3xf32>, %key: tensor<3xi64>) {
  // expected-error @+1 {{operand #1 must be tensor<2xi64> holding (seed, step)}}
  %0 = "gpuc.dropout"(%x, %key) <{ratio = 0.5 : f64, stream = 0 : i64}> : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<2x3xf32>
  return
}

// -----

// expected-error @+1 {{'gpuc.rng' is a unit attribute on a tensor<2xi64> argument}}
func.func @rng_arg(%key: tensor<3xi64> {gpuc.rng}) {
  return
}

// -----

// expected-error @+1 {{'gpuc.hyper' belongs on a scalar float argument}}
func.func @hyper_arg(%lr: tensor<2xf32> {gpuc.hyper = "lr"}) {
  return
}

// -----

func.func @iota(%x: tensor<2xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = gpuc.iota dim = 2 : tensor<2x3xi64>
  return
}

// -----

func.func @scatter_add(%e: tensor<2x5x6xf32>, %ids: tensor<2x5xi64>) {
  // expected-error @+1 {{updates shape 2x5x6 does not match the expected 2x5x7}}
  %0 = gpuc.scatter_add %e, %ids axis = 0 : (tensor<2x5x6xf32>, tensor<2x5xi64>) -> tensor<10x7xf32>
  return
}

// -----

func.func @row_groups_offsets(%ids: tensor<2x5xi64>) {
  // expected-error @+1 {{offsets shape 10 is not [rows + 1] = [11]}}
  %o, %p = gpuc.row_groups %ids rows = 10 : tensor<2x5xi64> -> tensor<10xi32>, tensor<10xi32>
  return
}

// -----

func.func @row_groups_order(%ids: tensor<2x5xi64>) {
  // expected-error @+1 {{order shape 2x5 is not [10], one per index}}
  %o, %p = gpuc.row_groups %ids rows = 10 : tensor<2x5xi64> -> tensor<11xi32>, tensor<2x5xi32>
  return
}

// -----

func.func @row_groups_rows(%ids: tensor<3xi64>) {
  // expected-error @+1 {{rows 0 is outside [1, 2147483647)}}
  %o, %p = gpuc.row_groups %ids rows = 0 : tensor<3xi64> -> tensor<1xi32>, tensor<3xi32>
  return
}

// -----

func.func @segment_sum_updates(%u: tensor<6x5xf32>, %o: tensor<11xi32>, %p: tensor<6xi32>) {
  // expected-error @+1 {{updates shape 6x5 does not match the expected 6x4 (the result's, with one entry per position along the axis)}}
  %0 = gpuc.segment_sum %u, %o, %p axis = 0 : (tensor<6x5xf32>, tensor<11xi32>, tensor<6xi32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @segment_sum_offsets(%u: tensor<6x4xf32>, %o: tensor<10xi32>, %p: tensor<6xi32>) {
  // expected-error @+1 {{offsets shape 10 is not [rows + 1] = [11]}}
  %0 = gpuc.segment_sum %u, %o, %p axis = 0 : (tensor<6x4xf32>, tensor<10xi32>, tensor<6xi32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @segment_sum_axis(%u: tensor<6x4xf32>, %o: tensor<11xi32>, %p: tensor<6xi32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = gpuc.segment_sum %u, %o, %p axis = 2 : (tensor<6x4xf32>, tensor<11xi32>, tensor<6xi32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @segment_sum_type(%u: tensor<6x4xf16>, %o: tensor<11xi32>, %p: tensor<6xi32>) {
  // expected-error @+1 {{result element type differs from the updates'}}
  %0 = gpuc.segment_sum %u, %o, %p axis = 0 : (tensor<6x4xf16>, tensor<11xi32>, tensor<6xi32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @conv_channels_last(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x2xf32>) {
  // expected-error @+1 {{(channels last, read as NCHW) filter expects 2 input channels, input has 3}}
  %0 = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 channels_last : (tensor<1x8x8x3xf32>, tensor<4x3x3x2xf32>) -> tensor<1x6x6x4xf32>
  return
}

// -----

func.func @conv_channels_last_result(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{result shape 1x4x6x6 does not match the expected 1x6x6x4}}
  %0 = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 channels_last : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_channels_last_rank(%x: tensor<8x8x3xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{input and filter must be rank 4 (channels last: NHWC, OHWI)}}
  %0 = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 channels_last : (tensor<8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<6x6x4xf32>
  return
}

// -----

func.func @conv_backward_filter_channels_last(%x: tensor<2x8x8x3xf32>, %dy: tensor<2x4x6x6xf32>) {
  // expected-error @+1 {{result shape 2x4x6x6 does not match the expected 2x6x6x4}}
  %0 = gpuc.conv2d_backward_filter %x, %dy strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 channels_last : (tensor<2x8x8x3xf32>, tensor<2x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  return
}

// -----

func.func @pool_channels_last(%x: tensor<2x8x8x3xf32>) {
  // expected-error @+1 {{result shape 2x3x4x4 does not match the expected 2x4x4x3}}
  %0 = gpuc.max_pool2d %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x3xf32> -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @pool_backward_channels_last(%dy: tensor<2x4x4x3xf32>) {
  // expected-error @+1 {{(channels last, read as NCHW) padding must be smaller than the kernel}}
  %0 = gpuc.avg_pool2d_backward %dy kernel = [2, 2] strides = [2, 2] pads = [2, 0, 0, 0] channels_last : tensor<2x4x4x3xf32> -> tensor<2x8x8x3xf32>
  return
}

// -----

func.func @conv_backward_input(%dy: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{does not match the expected 2x4x7x7}}
  %0 = gpuc.conv2d_backward_input %dy, %w strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  return
}

// -----

func.func @conv_backward_filter(%x: tensor<2x3x8x8xf32>, %dy: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{does not match the expected 2x4x6x6}}
  %0 = gpuc.conv2d_backward_filter %x, %dy strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>
  return
}

// -----

func.func @max_pool_backward(%i: tensor<2x3x3x3xi8>, %dy: tensor<2x3x3x3xf32>) {
  // expected-error @+1 {{does not match the expected 2x3x4x4}}
  %0 = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x3x3xi8>, tensor<2x3x3x3xf32> -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @max_pool_backward_indices(%i: tensor<2x3x4x3xi8>, %dy: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{indices shape 2x3x4x3 differs from grad_output shape 2x3x4x4}}
  %0 = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x4x3xi8>, tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @max_pool_backward_types(%i: tensor<2x3x4x4xi8>, %dy: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{result and grad_output element types differ}}
  %0 = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x4x4xi8>, tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf16>
  return
}

// -----

func.func @max_pool_argmax_shape(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{does not match the expected 2x3x4x4}}
  %0 = gpuc.max_pool2d_argmax %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x8x8xf32> -> tensor<2x3x3x3xi8>
  return
}

// -----

func.func @max_pool_argmax_i8(%x: tensor<1x1x16x16xf32>) {
  // expected-error @+1 {{window positions of a 12x12 kernel do not fit i8; use i32}}
  %0 = gpuc.max_pool2d_argmax %x kernel = [12, 12] strides = [1, 1] pads = [0, 0, 0, 0] : tensor<1x1x16x16xf32> -> tensor<1x1x5x5xi8>
  return
}

// -----

func.func @avg_pool_backward(%dy: tensor<2x3x3x3xf32>) {
  // expected-error @+1 {{does not match the expected 2x3x4x4}}
  %0 = gpuc.avg_pool2d_backward %dy kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x3x3xf32> -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @fusion_arg_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{input #0 has type 'tensor<4xf32>' but the body argument has 'tensor<8xf32>'}}
  %r = gpuc.fusion(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<8xf32>):
    %s = gpuc.slice %a starts = [0] limits = [4] strides = [1] : tensor<8xf32> -> tensor<4xf32>
    gpuc.yield %s : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @fusion_yield_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yields 1 values whose types differ from its results}}
  %r = gpuc.fusion(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = gpuc.cast %a : tensor<4xf32> to tensor<4xi64>
    gpuc.yield %c : tensor<4xi64>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @fusion_library_call(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = gpuc.fusion(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @+1 {{cannot be part of a generated kernel}}
    %m = gpuc.matmul %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    gpuc.yield %m : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>
}

// -----

func.func @fusion_no_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{writes nothing: a kernel must yield a value}}
  gpuc.fusion(%x) : (tensor<4xf32>) -> () {
  ^bb0(%a: tensor<4xf32>):
    gpuc.yield
  }
  return
}

// -----

func.func @attention_rank(%q: tensor<3x5x4xf32>) {
  // expected-error @+1 {{query, key and value must be rank 4 [batch, heads, rows, width], got 3x5x4, 3x5x4, 3x5x4}}
  %o, %l = gpuc.attention %q, %q, %q scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>, tensor<3x5xf32>
  return
}

// -----

func.func @attention_key_width(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x8xf32>, %v: tensor<2x3x7x6xf32>) {
  // expected-error @+1 {{key 2x3x7x8 must be [2, heads dividing 3, keys, 4] for query 2x3x5x4}}
  %o, %l = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x6xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_key_heads(%q: tensor<2x6x5x4xf32>, %k: tensor<2x4x7x4xf32>, %v: tensor<2x4x7x6xf32>) {
  // expected-error @+1 {{key 2x4x7x4 must be [2, heads dividing 6, keys, 4] for query 2x6x5x4}}
  %o, %l = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x4x7x4xf32>, tensor<2x4x7x6xf32> -> tensor<2x6x5x6xf32>, tensor<2x6x5xf32>
  return
}

// -----

func.func @attention_value_heads(%q: tensor<2x6x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x2x7x6xf32>) {
  // expected-error @+1 {{value 2x2x7x6 must be [2, 3, 7, width] for key 2x3x7x4}}
  %o, %l = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x2x7x6xf32> -> tensor<2x6x5x6xf32>, tensor<2x6x5xf32>
  return
}

// -----

func.func @attention_value_rows(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x3x6x6xf32>) {
  // expected-error @+1 {{value 2x3x6x6 must be [2, 3, 7, width] for key 2x3x7x4}}
  %o, %l = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x6x6xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x3x7x6xf32>) {
  // expected-error @+1 {{result shape 2x3x5x4 is not [batch, heads, query rows, value width] = 2x3x5x6}}
  %o, %l = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_logsumexp(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x3x7x6xf32>) {
  // expected-error @+1 {{logsumexp shape 2x3x7 is not [batch, heads, query rows] = 2x3x5}}
  %o, %l = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x7xf32>
  return
}

// -----

func.func @attention_mask(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x3x7x6xf32>, %m: tensor<1x3x7x5xi1>) {
  // expected-error @+1 {{mask 1x3x7x5 does not broadcast to the scores 2x3x5x7 (rank 4, each dimension 1 or the scores')}}
  %o, %l = gpuc.attention %q, %k, %v mask %m : tensor<1x3x7x5xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_triangle_eq(%q: tensor<2x3x5x4xf32>, %m: tensor<1x1x5x5xi1>) {
  // expected-error @+1 {{mask_triangle must be lt, le, gt or ge, not eq}}
  %o, %l = gpuc.attention %q, %q, %q mask %m : tensor<1x1x5x5xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle eq : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_fill(%q: tensor<2x3x5x4xf32>) {
  // expected-error @+1 {{fill must be finite or -inf}}
  %o, %l = gpuc.attention %q, %q, %q scale = 5.000000e-01 fill = 0x7FF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x3x5x4xf32>) {
  // expected-error @+1 {{scale must be finite}}
  %o, %l = gpuc.attention %q, %q, %q scale = 0x7FF8000000000000 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_dropout_key(%q: tensor<2x3x5x4xf32>) {
  // expected-error @+1 {{dropout needs an rng key, and an rng key needs dropout > 0}}
  %o, %l = gpuc.attention %q, %q, %q scale = 5.000000e-01 fill = 0xFFF0000000000000 {dropout = 1.000000e-01 : f64} : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_dropout_ratio(%q: tensor<2x3x5x4xf32>, %key: tensor<2xi64>) {
  // expected-error @+1 {{dropout 1.000000e+00 is outside [0, 1)}}
  %o, %l = gpuc.attention %q, %q, %q key %key scale = 5.000000e-01 fill = 0xFFF0000000000000 {dropout = 1.000000e+00 : f64} : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_element_types(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xbf16>) {
  // expected-error @+1 {{query, key, value and result must share one element type}}
  %o, %l = gpuc.attention %q, %k, %q scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xbf16>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @attention_grad_result(%q: tensor<2x3x5x4xf32>, %o: tensor<2x3x5x6xf32>, %l: tensor<2x3x5xf32>) {
  // expected-error @+1 {{result shape 2x3x5x6 is not [batch, heads, query rows, value width] = 2x3x5x4}}
  %dq, %dk, %dv = gpuc.attention_grad %q, %q, %q, %o, %l, %o scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  return
}

// -----

func.func @matmul_acc_type(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<2x5xf32>) {
  // expected-error @+1 {{accumulates into 'tensor<2x5xf32>' but its result is 'tensor<2x4xf32>'}}
  %0 = gpuc.matmul %a, %b plus %c : tensor<2x5xf32> : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_acc_layout(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %c: tensor<3x2x5xf32>) {
  // expected-error @+1 {{accumulates into a result with a layout}}
  %0 = gpuc.matmul %a, %b result_perm = [1, 0, 2] plus %c : tensor<3x2x5xf32> : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<3x2x5xf32>
  return
}

// -----

func.func @linear_loss_features(%h: tensor<6x4xf32>, %w: tensor<9x5xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{input has 4 features but the weight's rows have 5}}
  %0 = gpuc.linear_cross_entropy %h, %w, %y reduction = mean : (tensor<6x4xf32>, tensor<9x5xf32>, tensor<6xi64>) -> tensor<f32>
  return
}

// -----

func.func @linear_loss_labels(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %y: tensor<5xi64>) {
  // expected-error @+1 {{labels must have shape 6, got 5}}
  %0 = gpuc.linear_cross_entropy %h, %w, %y reduction = mean : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @linear_loss_bias(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %b: tensor<4xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{bias must have shape 9, got 4}}
  %0 = gpuc.linear_cross_entropy %h, %w, %y bias %b : tensor<4xf32> reduction = mean : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<f32>
  return
}

// -----

func.func @linear_loss_narrow_loss(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{result element type 'bf16' is neither the input's ('f32') nor f32 for f16/bf16 inputs}}
  %0 = gpuc.linear_cross_entropy %h, %w, %y reduction = mean : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<bf16>
  return
}

// -----

func.func @linear_loss_none(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{needs reduction mean or sum}}
  %0 = gpuc.linear_cross_entropy %h, %w, %y reduction = none : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<6xf32>
  return
}

// -----

func.func @linear_loss_rank(%h: tensor<2x3x4xf32>, %w: tensor<9x4xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{input must be N x C and weight V x C, got 2x3x4 and 9x4}}
  %0 = gpuc.linear_cross_entropy %h, %w, %y reduction = mean : (tensor<2x3x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<f32>
  return
}

// -----

func.func @token_scores_features(%h: tensor<6x4xf32>, %w: tensor<9x5xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{input has 4 features but the weight's rows have 5}}
  %s:2 = gpuc.linear_token_scores %h, %w, %y : (tensor<6x4xf32>, tensor<9x5xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @token_scores_narrow_sum(%h: tensor<6x4xbf16>, %w: tensor<9x4xbf16>, %y: tensor<6xi64>) {
  // expected-error @+1 {{loss_sum must be a scalar of 'f32' (f32 for f16/bf16 inputs), not 'tensor<bf16>'}}
  %s:2 = gpuc.linear_token_scores %h, %w, %y : (tensor<6x4xbf16>, tensor<9x4xbf16>, tensor<6xi64>) -> (tensor<bf16>, tensor<bf16>)
  return
}

// -----

func.func @token_scores_sum_shape(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{result shape 6 does not match the expected}}
  %s:2 = gpuc.linear_token_scores %h, %w, %y : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> (tensor<6xf32>, tensor<f32>)
  return
}

// -----

func.func @token_scores_correct_type(%h: tensor<6x4xbf16>, %w: tensor<9x4xbf16>, %y: tensor<6xi64>) {
  // expected-error @+1 {{correct must have loss_sum's type 'tensor<f32>'}}
  %s:2 = gpuc.linear_token_scores %h, %w, %y : (tensor<6x4xbf16>, tensor<9x4xbf16>, tensor<6xi64>) -> (tensor<f32>, tensor<bf16>)
  return
}

// -----

func.func @token_scores_rows(%h: tensor<16777217x4xf32>, %w: tensor<9x4xf32>, %y: tensor<16777217xi64>) {
  // expected-error @+1 {{counts at most 2^24 rows in a float, not 16777217}}
  %s:2 = gpuc.linear_token_scores %h, %w, %y : (tensor<16777217x4xf32>, tensor<9x4xf32>, tensor<16777217xi64>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @linear_loss_grad_seed(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %y: tensor<6xi64>, %g: tensor<1xf32>) {
  // expected-error @+1 {{result shape 1 does not match the expected}}
  %l, %dh, %dw = gpuc.linear_cross_entropy_grad %h, %w, %y, %g reduction = mean : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>, tensor<1xf32>) -> (tensor<f32>, tensor<6x4xf32>, tensor<9x4xf32>)
  return
}

// -----

func.func @linear_loss_grad_bias(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %b: tensor<9xf32>, %y: tensor<6xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{has a bias gradient exactly when it has a bias}}
  %l, %dh, %dw = gpuc.linear_cross_entropy_grad %h, %w, %y, %g bias %b : tensor<9xf32> reduction = mean : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x4xf32>, tensor<9x4xf32>)
  return
}

// -----

func.func @all_reduce_nothing() {
  // expected-error @+1 {{reduces nothing: it needs at least one tensor}}
  "gpuc.all_reduce"() <{bucket = 0 : i64}> : () -> ()
  return
}

// -----

func.func @all_reduce_bucket(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{bucket -1 is negative}}
  %r = gpuc.all_reduce %g bucket = -1 : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @all_reduce_types(%g: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{results must have the operands' types}}
  %r = "gpuc.all_reduce"(%g) <{bucket = 0 : i64}> : (tensor<4xf32>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// -----

func.func @reduce_scatter_shard(%g: tensor<10xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{shard #0 is 'tensor<5xf32>', but a shard of 'tensor<10xf32>' over 3 ranks is 'tensor<4xf32>'}}
  %s = gpuc.reduce_scatter %g bucket = 0 ranks = 3 : (tensor<10xf32>) -> (tensor<5xf32>)
  return %s : tensor<5xf32>
}

// -----

func.func @reduce_scatter_ranks(%g: tensor<10xf32>) -> tensor<10xf32> {
  // expected-error @+1 {{ranks 0 must be at least 1}}
  %s = gpuc.reduce_scatter %g bucket = 0 ranks = 0 : (tensor<10xf32>) -> (tensor<10xf32>)
  return %s : tensor<10xf32>
}

// -----

func.func @reduce_scatter_bucket(%g: tensor<10xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{bucket -2 is negative}}
  %s = gpuc.reduce_scatter %g bucket = -2 ranks = 2 : (tensor<10xf32>) -> (tensor<5xf32>)
  return %s : tensor<5xf32>
}

// -----

func.func @reduce_scatter_count(%g: tensor<10xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  // expected-error @+1 {{has 1 whole tensors but 2 shards}}
  %s:2 = gpuc.reduce_scatter %g bucket = 0 ranks = 2 : (tensor<10xf32>) -> (tensor<5xf32>, tensor<5xf32>)
  return %s#0, %s#1 : tensor<5xf32>, tensor<5xf32>
}

// -----

func.func @all_gather_nothing() {
  // expected-error @+1 {{has no tensor: it needs at least one}}
  "gpuc.all_gather"() <{bucket = 0 : i64, ranks = 2 : i64}> : () -> ()
  return
}

// -----

func.func @all_gather_type(%s: tensor<5xf16>) -> tensor<10xf32> {
  // expected-error @+1 {{shard #0 is 'tensor<5xf16>', but a shard of 'tensor<10xf32>' over 2 ranks is 'tensor<5xf32>'}}
  %w = gpuc.all_gather %s bucket = 0 ranks = 2 : (tensor<5xf16>) -> (tensor<10xf32>)
  return %w : tensor<10xf32>
}

// -----

func.func @rank_shard_rank(%w: tensor<2x5xf32>) -> tensor<1x5xf32> {
  // expected-error @+1 {{shard #0 is 'tensor<1x5xf32>', but a shard of 'tensor<2x5xf32>' over 2 ranks is 'tensor<5xf32>'}}
  %s = gpuc.rank_shard %w ranks = 2 : tensor<2x5xf32> -> tensor<1x5xf32>
  return %s : tensor<1x5xf32>
}

// -----

// Sharded over 2 ranks, a gradient is the parameter's or its shard's shape.
gpuc.parameter @w trainable : tensor<5xf32> = dense<1.0> : tensor<5xf32>
// expected-error @+1 {{'gpuc.grad' @w has type 'tensor<5xf32>' but the value has type 'tensor<2xf32>'}}
func.func @train_step(%g: tensor<2xf32> {gpuc.input = "g"}) -> (tensor<2xf32> {gpuc.grad = @w}) attributes {gpuc.data_parallel = {shard_ranks = 2 : i64}} {
  return %g : tensor<2xf32>
}

// -----

// A resource blob whose size is not the tensor's (4 bytes for 4 floats).
// expected-error @+1 {{'gpuc.parameter' op initial value has resource 'short_weight' of 4 bytes, where 'tensor<2x2xf32>' needs 16}}
gpuc.parameter @w trainable : tensor<2x2xf32> = dense_resource<short_weight> : tensor<2x2xf32>
{-#
  dialect_resources: {
    builtin: {
      short_weight: "0x040000000000803F"
    }
  }
#-}

// -----

func.func @short_constant() -> tensor<3xi64> {
  // expected-error @+1 {{'gpuc.constant' op value has resource 'short_constant' of 16 bytes, where 'tensor<3xi64>' needs 24}}
  %c = gpuc.constant dense_resource<short_constant> : tensor<3xi64>
  return %c : tensor<3xi64>
}
{-#
  dialect_resources: {
    builtin: {
      short_constant: "0x0800000001000000000000000200000000000000"
    }
  }
#-}
