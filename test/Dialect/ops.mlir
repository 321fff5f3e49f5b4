// RUN: gpuc-opt %s | gpuc-opt | FileCheck %s
// Round trip of the custom assembly of every gpuc op.

gpuc.parameter @w trainable : tensor<4x8xf32> = dense<5.000000e-01> : tensor<4x8xf32>
gpuc.parameter @rm : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32>
// CHECK: gpuc.parameter @w trainable : tensor<4x8xf32> = dense<5.000000e-01> : tensor<4x8xf32>
// CHECK: gpuc.parameter @rm : tensor<3xf32>

// CHECK-LABEL: func.func @core
func.func @core(%x: tensor<2x8xf32> {gpuc.input = "x"}, %w: tensor<4x8xf32> {gpuc.param = @w}, %i: tensor<2xi64>) -> (tensor<2x4xf32> {gpuc.output = "y"}) {
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %0 = gpuc.matmul %x, %w transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  // CHECK: gpuc.relu
  %1 = gpuc.relu %0 : tensor<2x4xf32>
  // CHECK: gpuc.reduce_sum %{{.+}} axes = [1] keep_dims : tensor<2x4xf32> -> tensor<2x1xf32>
  %2 = gpuc.reduce_sum %1 axes = [1] keep_dims : tensor<2x4xf32> -> tensor<2x1xf32>
  // CHECK: gpuc.broadcast %{{.+}} : tensor<2x1xf32> -> tensor<2x4xf32>
  %3 = gpuc.broadcast %2 : tensor<2x1xf32> -> tensor<2x4xf32>
  // CHECK: gpuc.compare lt, %{{.+}}, %{{.+}} : tensor<2x4xf32>
  %4 = gpuc.compare lt, %1, %3 : tensor<2x4xf32>
  // CHECK: gpuc.select %{{.+}}, %{{.+}}, %{{.+}} : tensor<2x4xi1>, tensor<2x4xf32>
  %5 = gpuc.select %4, %1, %3 : tensor<2x4xi1>, tensor<2x4xf32>
  // CHECK: gpuc.transpose %{{.+}} perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %6 = gpuc.transpose %5 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  // CHECK: gpuc.slice %{{.+}} starts = [0, 0] limits = [4, 2] strides = [2, 1] : tensor<4x2xf32> -> tensor<2x2xf32>
  %7 = gpuc.slice %6 starts = [0, 0] limits = [4, 2] strides = [2, 1] : tensor<4x2xf32> -> tensor<2x2xf32>
  // CHECK: gpuc.concat %{{.+}}, %{{.+}} axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %8 = gpuc.concat %7, %7 axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  // CHECK: gpuc.gather %{{.+}}[%{{.+}}] axis = 0 : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %9 = gpuc.gather %8[%i] axis = 0 : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  // CHECK: gpuc.cast %{{.+}} : tensor<2x4xf32> to tensor<2x4xf16>
  %10 = gpuc.cast %9 : tensor<2x4xf32> to tensor<2x4xf16>
  // CHECK: gpuc.pad %{{.+}} low = [0, 1] high = [0, 1] value = 0.000000e+00 : tensor<2x4xf16> -> tensor<2x6xf16>
  %11 = gpuc.pad %10 low = [0, 1] high = [0, 1] value = 0.0 : tensor<2x4xf16> -> tensor<2x6xf16>
  %12 = gpuc.add %9, %9 : tensor<2x4xf32>
  %13 = gpuc.sub %12, %9 : tensor<2x4xf32>
  %14 = gpuc.mul %13, %9 : tensor<2x4xf32>
  %15 = gpuc.div %14, %9 : tensor<2x4xf32>
  %16 = gpuc.pow %15, %9 : tensor<2x4xf32>
  %17 = gpuc.max %16, %9 : tensor<2x4xf32>
  %18 = gpuc.min %17, %9 : tensor<2x4xf32>
  %19 = gpuc.exp %18 : tensor<2x4xf32>
  %20 = gpuc.rsqrt %19 : tensor<2x4xf32>
  // CHECK: gpuc.reshape %{{.+}} : tensor<2x4xf32> -> tensor<8xf32>
  %21 = gpuc.reshape %20 : tensor<2x4xf32> -> tensor<8xf32>
  return %20 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @layouts
func.func @layouts(%q: tensor<2x5x3x4xf32>, %s: tensor<2x3x5x5xf32>) -> (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) {
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} transpose_rhs lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x3x5x5xf32>
  %0 = gpuc.matmul %q, %q transpose_rhs lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x3x5x5xf32>
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} rhs_perm = [0, 2, 1, 3] result_perm = [0, 2, 1, 3] : (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32>
  %1 = gpuc.matmul %s, %q rhs_perm = [0, 2, 1, 3] result_perm = [0, 2, 1, 3] : (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32>
  return %0, %1 : tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>
}

// A window of the stored rows' columns, in the short form the op prints
// and in the attribute's full name.
// CHECK-LABEL: func.func @column_windows
func.func @column_windows(%qkv: tensor<2x5x36xf32>) -> (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) {
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} transpose_rhs lhs_window = <offset = 0, shape = [3, 4]> rhs_window = <offset = 12, shape = [3, 4]> lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] : (tensor<2x5x36xf32>, tensor<2x5x36xf32>) -> tensor<2x3x5x5xf32>
  %0 = gpuc.matmul %qkv, %qkv transpose_rhs lhs_window = <offset = 0, shape = [3, 4]> rhs_window = #gpuc.columns<offset = 12, shape = [3, 4]> lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] : (tensor<2x5x36xf32>, tensor<2x5x36xf32>) -> tensor<2x3x5x5xf32>
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} rhs_window = <offset = 24, shape = [3, 4]> rhs_perm = [0, 2, 1, 3] result_perm = [0, 2, 1, 3] : (tensor<2x3x5x5xf32>, tensor<2x5x36xf32>) -> tensor<2x5x3x4xf32>
  %1 = gpuc.matmul %0, %qkv rhs_window = <offset = 24, shape = [3, 4]> rhs_perm = [0, 2, 1, 3] result_perm = [0, 2, 1, 3] : (tensor<2x3x5x5xf32>, tensor<2x5x36xf32>) -> tensor<2x5x3x4xf32>
  return %0, %1 : tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>
}

// A causal attention's products in bands that skip its triangle.
// CHECK-LABEL: func.func @triangles
func.func @triangles(%q: tensor<2x3x8x4xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x4xf32>) {
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} transpose_rhs result_triangle gt bands 4 : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x8x8xf32>
  %0 = gpuc.matmul %q, %q transpose_rhs result_triangle gt bands 4 : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} transpose_lhs lhs_triangle lt bands 2 : (tensor<2x3x8x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x8x4xf32>
  %1 = gpuc.matmul %0, %q transpose_lhs lhs_triangle lt bands 2 : (tensor<2x3x8x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x8x4xf32>
  return %0, %1 : tensor<2x3x8x8xf32>, tensor<2x3x8x4xf32>
}

// CHECK-LABEL: func.func @linear_loss
func.func @linear_loss(%h: tensor<6x4xf32>, %w: tensor<9x4xf32>, %b: tensor<9xf32>, %y: tensor<6xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<6x4xf32>, tensor<9x4xf32>, tensor<9xf32>, tensor<9x4xf32>) {
  // CHECK: gpuc.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} bias %{{.+}} : tensor<9xf32> reduction = mean ignore_index = -100 : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<f32>
  %0 = gpuc.linear_cross_entropy %h, %w, %y bias %b : tensor<9xf32> reduction = mean ignore_index = -100 : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<f32>
  // CHECK: gpuc.linear_token_scores %{{.+}}, %{{.+}}, %{{.+}} bias %{{.+}} : tensor<9xf32> ignore_index = -1 : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<f32>)
  %s:2 = gpuc.linear_token_scores %h, %w, %y bias %b : tensor<9xf32> ignore_index = -1 : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<f32>)
  // CHECK: gpuc.linear_cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} bias %{{.+}} : tensor<9xf32> reduction = sum : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x4xf32>, tensor<9x4xf32>, tensor<9xf32>)
  %l, %dh, %dw, %db = gpuc.linear_cross_entropy_grad %h, %w, %y, %g bias %b : tensor<9xf32> reduction = sum : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x4xf32>, tensor<9x4xf32>, tensor<9xf32>)
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} transpose_lhs plus %{{.+}} : tensor<9x4xf32> : (tensor<6x9xf32>, tensor<6x4xf32>) -> tensor<9x4xf32>
  %z = gpuc.matmul %h, %w transpose_rhs : (tensor<6x4xf32>, tensor<9x4xf32>) -> tensor<6x9xf32>
  %acc = gpuc.matmul %z, %h transpose_lhs plus %dw : tensor<9x4xf32> : (tensor<6x9xf32>, tensor<6x4xf32>) -> tensor<9x4xf32>
  return %0, %l, %dh, %dw, %db, %acc : tensor<f32>, tensor<f32>, tensor<6x4xf32>, tensor<9x4xf32>, tensor<9xf32>, tensor<9x4xf32>
}

// CHECK-LABEL: func.func @linear_loss_low
// 16-bit logits: the loss and a weight gradient summed over chunks are f32.
func.func @linear_loss_low(%h: tensor<6x4xbf16>, %w: tensor<9x4xbf16>, %y: tensor<6xi64>, %g: tensor<f32>, %z: tensor<6x9xbf16>, %dw: tensor<9x4xf32>) -> (tensor<f32>, tensor<9x4xf32>) {
  // CHECK: gpuc.linear_cross_entropy_grad {{.*}} : (tensor<6x4xbf16>, tensor<9x4xbf16>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x4xbf16>, tensor<9x4xbf16>)
  %l, %dh, %dwl = gpuc.linear_cross_entropy_grad %h, %w, %y, %g reduction = mean : (tensor<6x4xbf16>, tensor<9x4xbf16>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x4xbf16>, tensor<9x4xbf16>)
  // CHECK: gpuc.matmul %{{.+}}, %{{.+}} transpose_lhs plus %{{.+}} : tensor<9x4xf32> : (tensor<6x9xbf16>, tensor<6x4xbf16>) -> tensor<9x4xf32>
  %acc = gpuc.matmul %z, %h transpose_lhs plus %dw : tensor<9x4xf32> : (tensor<6x9xbf16>, tensor<6x4xbf16>) -> tensor<9x4xf32>
  return %l, %acc : tensor<f32>, tensor<9x4xf32>
}

// CHECK-LABEL: func.func @windows
func.func @windows(%x: tensor<2x1x8x8xf32>, %f: tensor<4x1x3x3xf32>) -> tensor<2x4x4x4xf32> {
  // CHECK: gpuc.conv2d %{{.+}}, %{{.+}} strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1
  %0 = gpuc.conv2d %x, %f strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: gpuc.max_pool2d %{{.+}} kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0]
  %1 = gpuc.max_pool2d %0 kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  // CHECK: gpuc.avg_pool2d %{{.+}} kernel = [3, 3] strides = [1, 1] pads = [1, 1, 1, 1] count_include_pad
  %2 = gpuc.avg_pool2d %1 kernel = [3, 3] strides = [1, 1] pads = [1, 1, 1, 1] count_include_pad : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  return %2 : tensor<2x4x4x4xf32>
}

// CHECK-LABEL: func.func @composites
func.func @composites(%x: tensor<2x3x4x4xf32>, %g: tensor<3xf32>, %rm: tensor<3xf32> {gpuc.param = @rm}, %l: tensor<2xi64>, %z: tensor<2x3xf32>, %key: tensor<2xi64> {gpuc.rng}) -> (tensor<f32>, tensor<3xf32> {gpuc.update = @rm}) {
  // CHECK: gpuc.batch_norm_train %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} epsilon = 1.000000e-05 momentum = 9.000000e-01 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %y, %m, %v = gpuc.batch_norm_train %x, %g, %g, %rm, %g epsilon = 1.0e-5 momentum = 0.9 : tensor<2x3x4x4xf32>, tensor<3xf32>
  // CHECK: gpuc.layer_norm %{{.+}}, %{{.+}}, %{{.+}} axis = 1 epsilon = 1.000000e-05 : tensor<2x3xf32>, tensor<3xf32>
  %n = gpuc.layer_norm %z, %g, %g axis = 1 epsilon = 1.0e-5 : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: gpuc.gelu %{{.+}} tanh : tensor<2x3xf32>
  %a = gpuc.gelu %n tanh : tensor<2x3xf32>
  // CHECK: gpuc.dropout %{{.+}}, %{{.+}} stream = 3 ratio = 1.000000e-01 : tensor<2x3xf32>
  %d = gpuc.dropout %a, %key stream = 3 ratio = 0.1 : tensor<2x3xf32>
  // CHECK: gpuc.softmax %{{.+}} axis = 1 : tensor<2x3xf32>
  %s = gpuc.softmax %d axis = 1 : tensor<2x3xf32>
  // CHECK: gpuc.log_softmax %{{.+}} axis = 1 : tensor<2x3xf32>
  %ls = gpuc.log_softmax %s axis = 1 : tensor<2x3xf32>
  // CHECK: gpuc.nll_loss %{{.+}}, %{{.+}} reduction = mean ignore_index = -100 : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  %nll = gpuc.nll_loss %ls, %l reduction = mean ignore_index = -100 : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  // CHECK: gpuc.cross_entropy %{{.+}}, %{{.+}} reduction = sum : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  %ce = gpuc.cross_entropy %z, %l reduction = sum : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  // CHECK: gpuc.mse_loss %{{.+}}, %{{.+}} reduction = mean : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  %mse = gpuc.mse_loss %z, %s reduction = mean : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %mse, %m : tensor<f32>, tensor<3xf32>
}

// Channels last: NHWC input and result, OHWI filter.
// CHECK-LABEL: func.func @channels_last_convolutions
func.func @channels_last_convolutions(%x: tensor<2x8x8x3xf32>, %w: tensor<6x3x3x1xf32>, %dy: tensor<2x4x4x6xf32>) -> (tensor<2x4x4x6xf32>, tensor<2x8x8x3xf32>, tensor<6x3x3x1xf32>) {
  // CHECK: gpuc.conv2d %{{.+}}, %{{.+}} strides = [2, 2] pads = [1, 1, 0, 0] dilations = [1, 1] groups = 3 channels_last : (tensor<2x8x8x3xf32>, tensor<6x3x3x1xf32>) -> tensor<2x4x4x6xf32>
  %0 = gpuc.conv2d %x, %w strides = [2, 2] pads = [1, 1, 0, 0] dilations = [1, 1] groups = 3 channels_last : (tensor<2x8x8x3xf32>, tensor<6x3x3x1xf32>) -> tensor<2x4x4x6xf32>
  // CHECK: gpuc.conv2d_backward_input %{{.+}}, %{{.+}} {{.*}} groups = 3 channels_last : (tensor<2x4x4x6xf32>, tensor<6x3x3x1xf32>) -> tensor<2x8x8x3xf32>
  %1 = gpuc.conv2d_backward_input %dy, %w strides = [2, 2] pads = [1, 1, 0, 0] dilations = [1, 1] groups = 3 channels_last : (tensor<2x4x4x6xf32>, tensor<6x3x3x1xf32>) -> tensor<2x8x8x3xf32>
  // CHECK: gpuc.conv2d_backward_filter %{{.+}}, %{{.+}} {{.*}} groups = 3 channels_last : (tensor<2x8x8x3xf32>, tensor<2x4x4x6xf32>) -> tensor<6x3x3x1xf32>
  %2 = gpuc.conv2d_backward_filter %x, %dy strides = [2, 2] pads = [1, 1, 0, 0] dilations = [1, 1] groups = 3 channels_last : (tensor<2x8x8x3xf32>, tensor<2x4x4x6xf32>) -> tensor<6x3x3x1xf32>
  // CHECK: gpuc.max_pool2d %{{.+}} kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x3xf32> -> tensor<2x4x4x3xf32>
  %p = gpuc.max_pool2d %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x3xf32> -> tensor<2x4x4x3xf32>
  // CHECK: gpuc.max_pool2d_argmax %{{.+}} channels_last : tensor<2x8x8x3xf32> -> tensor<2x4x4x3xi8>
  %i = gpuc.max_pool2d_argmax %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x8x8x3xf32> -> tensor<2x4x4x3xi8>
  // CHECK: gpuc.max_pool2d_backward %{{.+}}, %{{.+}} kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x4x4x3xi8>, tensor<2x4x4x3xf32> -> tensor<2x8x8x3xf32>
  %dp = gpuc.max_pool2d_backward %i, %p kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x4x4x3xi8>, tensor<2x4x4x3xf32> -> tensor<2x8x8x3xf32>
  // CHECK: gpuc.avg_pool2d %{{.+}} count_include_pad channels_last : tensor<2x8x8x3xf32> -> tensor<2x4x4x3xf32>
  %a = gpuc.avg_pool2d %dp kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] count_include_pad channels_last : tensor<2x8x8x3xf32> -> tensor<2x4x4x3xf32>
  // CHECK: gpuc.avg_pool2d_backward %{{.+}} channels_last : tensor<2x4x4x3xf32> -> tensor<2x8x8x3xf32>
  %da = gpuc.avg_pool2d_backward %a kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] channels_last : tensor<2x4x4x3xf32> -> tensor<2x8x8x3xf32>
  %sum = gpuc.add %1, %da : tensor<2x8x8x3xf32>
  return %0, %sum, %2 : tensor<2x4x4x6xf32>, tensor<2x8x8x3xf32>, tensor<6x3x3x1xf32>
}

// CHECK-LABEL: func.func @gradient_ops
func.func @gradient_ops(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %dy: tensor<2x4x8x8xf32>, %dp: tensor<2x3x4x4xf32>, %e: tensor<2x5x6xf32>, %ids: tensor<2x5xi64>) -> (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<10x6xf32>, tensor<2x10xi64>) {
  // CHECK: gpuc.conv2d_backward_input %{{.+}}, %{{.+}} strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  %0 = gpuc.conv2d_backward_input %dy, %w strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: gpuc.conv2d_backward_filter %{{.+}}, %{{.+}} strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>
  %1 = gpuc.conv2d_backward_filter %x, %dy strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>
  // CHECK: gpuc.max_pool2d_argmax %{{.+}} kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xi8>
  %i = gpuc.max_pool2d_argmax %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xi8>
  // CHECK: gpuc.max_pool2d_backward %{{.+}}, %{{.+}} kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x4x4xi8>, tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  %2 = gpuc.max_pool2d_backward %i, %dp kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x3x4x4xi8>, tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  // CHECK: gpuc.avg_pool2d_backward %{{.+}} kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] count_include_pad : tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  %3 = gpuc.avg_pool2d_backward %dp kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] count_include_pad : tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  // CHECK: gpuc.scatter_add %{{.+}}, %{{.+}} axis = 0 : (tensor<2x5x6xf32>, tensor<2x5xi64>) -> tensor<10x6xf32>
  %4 = gpuc.scatter_add %e, %ids axis = 0 : (tensor<2x5x6xf32>, tensor<2x5xi64>) -> tensor<10x6xf32>
  // CHECK: gpuc.row_groups %{{.+}} rows = 10 : tensor<2x5xi64> -> tensor<11xi32>, tensor<10xi32>
  %o, %p = gpuc.row_groups %ids rows = 10 : tensor<2x5xi64> -> tensor<11xi32>, tensor<10xi32>
  // CHECK: gpuc.segment_sum %{{.+}}, %{{.+}}, %{{.+}} axis = 0 : (tensor<10x6xf32>, tensor<11xi32>, tensor<10xi32>) -> tensor<10x6xf32>
  %s = gpuc.segment_sum %4, %o, %p axis = 0 : (tensor<10x6xf32>, tensor<11xi32>, tensor<10xi32>) -> tensor<10x6xf32>
  // CHECK: gpuc.iota dim = 1 : tensor<2x10xi64>
  %5 = gpuc.iota dim = 1 : tensor<2x10xi64>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<10x6xf32>, tensor<2x10xi64>
}

// -----

// CHECK-LABEL: func.func @fusion
// CHECK: %[[R:.+]]:2 = gpuc.fusion(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8xf32>):
// CHECK: gpuc.yield %{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @fusion(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %r:2 = gpuc.fusion(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %bc = gpuc.broadcast %c : tensor<8xf32> -> tensor<4x8xf32>
    %s = gpuc.add %a, %bc : tensor<4x8xf32>
    %t = gpuc.relu %s : tensor<4x8xf32>
    gpuc.yield %s, %t : tensor<4x8xf32>, tensor<4x8xf32>
  }
  return %r#0, %r#1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @attention
// CHECK: %[[O:.+]], %[[L:.+]] = gpuc.attention %arg0, %arg1, %arg2 mask %arg3 : tensor<1x1x5x7xi1> key %arg4 scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle ge {dropout = 2.500000e-01 : f64, mask_keeps, stream = 3 : i64} : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
// CHECK: gpuc.attention_grad %arg0, %arg1, %arg2, %[[O]], %[[L]], %[[O]] scale = 5.000000e-01 fill = -1.000000e+04 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
func.func @attention(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x3x7x6xf32>, %m: tensor<1x1x5x7xi1>, %key: tensor<2xi64>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>) {
  %o, %lse = gpuc.attention %q, %k, %v mask %m : tensor<1x1x5x7xi1> key %key scale = 0.5 fill = 0xFFF0000000000000 triangle ge {dropout = 0.25 : f64, stream = 3 : i64, mask_keeps} : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %o scale = 0.5 fill = -1.0e4 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  return %o, %dq : tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>
}

// Grouped-query attention: three query heads read each key head.
// CHECK-LABEL: func.func @grouped_attention
// CHECK: gpuc.attention %arg0, %arg1, %arg2 scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32> -> tensor<2x6x5x6xf32>, tensor<2x6x5xf32>
// CHECK: gpuc.attention_grad {{.*}} : tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32>, tensor<2x6x5x6xf32>, tensor<2x6x5xf32>
func.func @grouped_attention(%q: tensor<2x6x5x4xf32>, %k: tensor<2x2x7x4xf32>, %v: tensor<2x2x7x6xf32>) -> (tensor<2x6x5x6xf32>, tensor<2x2x7x4xf32>) {
  %o, %lse = gpuc.attention %q, %k, %v scale = 0.5 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32> -> tensor<2x6x5x6xf32>, tensor<2x6x5xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %o scale = 0.5 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32>, tensor<2x6x5x6xf32>, tensor<2x6x5xf32>
  return %o, %dk : tensor<2x6x5x6xf32>, tensor<2x2x7x4xf32>
}

// CHECK-LABEL: func.func @all_reduce
// CHECK: %[[G:.+]]:2 = gpuc.all_reduce %arg0, %arg1 bucket = 3 : tensor<10x4xf32>, tensor<10xf32>
// CHECK: return %[[G]]#0, %[[G]]#1
func.func @all_reduce(%dw: tensor<10x4xf32>, %db: tensor<10xf32>) -> (tensor<10x4xf32>, tensor<10xf32>) {
  %g:2 = gpuc.all_reduce %dw, %db bucket = 3 : tensor<10x4xf32>, tensor<10xf32>
  return %g#0, %g#1 : tensor<10x4xf32>, tensor<10xf32>
}

// Optimizer-state sharding over 3 ranks: shards of ceil(n / 3) elements.
// CHECK-LABEL: func.func @shards
// CHECK: %[[S:.+]]:2 = gpuc.reduce_scatter %arg0, %arg1 bucket = 0 ranks = 3 : (tensor<10x4xf32>, tensor<10xf32>) -> (tensor<14xf32>, tensor<4xf32>)
// CHECK: %[[P:.+]] = gpuc.rank_shard %arg2 ranks = 3 : tensor<10x4xf32> -> tensor<14xf32>
// CHECK: %[[W:.+]]:2 = gpuc.all_gather %[[P]], %[[S]]#1 bucket = 1 ranks = 3 : (tensor<14xf32>, tensor<4xf32>) -> (tensor<10x4xf32>, tensor<10xf32>)
func.func @shards(%dw: tensor<10x4xf32>, %db: tensor<10xf32>, %w: tensor<10x4xf32>) -> (tensor<10x4xf32>, tensor<10xf32>) {
  %s:2 = gpuc.reduce_scatter %dw, %db bucket = 0 ranks = 3 : (tensor<10x4xf32>, tensor<10xf32>) -> (tensor<14xf32>, tensor<4xf32>)
  %p = gpuc.rank_shard %w ranks = 3 : tensor<10x4xf32> -> tensor<14xf32>
  %g:2 = gpuc.all_gather %p, %s#1 bucket = 1 ranks = 3 : (tensor<14xf32>, tensor<4xf32>) -> (tensor<10x4xf32>, tensor<10xf32>)
  return %g#0, %g#1 : tensor<10x4xf32>, tensor<10xf32>
}
