// RUN: gpuc-opt %s --gpuc-channels-last --canonicalize --cse -split-input-file | FileCheck %s

// A convolution, a bias, a batch norm's centring and a ReLU into the next
// convolution: everything between the two runs on NHWC tensors. The input
// and the 3x3 filter are transposed in, the result back; a 1x1 filter and
// the bias only gain axes of size 1 (reshapes).
// CHECK-LABEL: func.func @between_convolutions
// CHECK: %[[X:.+]] = gpuc.transpose %arg0 perm = [0, 2, 3, 1] : tensor<2x3x8x8xf32> -> tensor<2x8x8x3xf32>
// CHECK: %[[W:.+]] = gpuc.transpose %arg1 perm = [0, 2, 3, 1] : tensor<4x3x3x3xf32> -> tensor<4x3x3x3xf32>
// CHECK: %[[Y:.+]] = gpuc.conv2d %[[X]], %[[W]] {{.*}} channels_last : (tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<2x8x8x4xf32>
// CHECK: %[[B:.+]] = gpuc.reshape %arg2 : tensor<4xf32> -> tensor<1x1x1x4xf32>
// CHECK: %[[BB:.+]] = gpuc.broadcast %[[B]] : tensor<1x1x1x4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[A:.+]] = gpuc.add %[[Y]], %[[BB]] : tensor<2x8x8x4xf32>
// CHECK: %[[M:.+]] = gpuc.reduce_mean %[[A]] axes = [0, 1, 2] keep_dims : tensor<2x8x8x4xf32> -> tensor<1x1x1x4xf32>
// CHECK: %[[MB:.+]] = gpuc.broadcast %[[M]] : tensor<1x1x1x4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[C:.+]] = gpuc.sub %[[A]], %[[MB]] : tensor<2x8x8x4xf32>
// CHECK: %[[R:.+]] = gpuc.relu %[[C]] : tensor<2x8x8x4xf32>
// CHECK: %[[W2:.+]] = gpuc.reshape %arg3 : tensor<5x4x1x1xf32> -> tensor<5x1x1x4xf32>
// CHECK: %[[Z:.+]] = gpuc.conv2d %[[R]], %[[W2]] {{.*}} channels_last : (tensor<2x8x8x4xf32>, tensor<5x1x1x4xf32>) -> tensor<2x8x8x5xf32>
// CHECK: %[[O:.+]] = gpuc.transpose %[[Z]] perm = [0, 3, 1, 2] : tensor<2x8x8x5xf32> -> tensor<2x5x8x8xf32>
// CHECK: return %[[O]]
func.func @between_convolutions(%x: tensor<2x3x8x8xf32>, %w1: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %w2: tensor<5x4x1x1xf32>) -> tensor<2x5x8x8xf32> {
  %y = gpuc.conv2d %x, %w1 strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %br = gpuc.reshape %b : tensor<4xf32> -> tensor<1x4x1x1xf32>
  %bb = gpuc.broadcast %br : tensor<1x4x1x1xf32> -> tensor<2x4x8x8xf32>
  %a = gpuc.add %y, %bb : tensor<2x4x8x8xf32>
  %m = gpuc.reduce_mean %a axes = [0, 2, 3] keep_dims : tensor<2x4x8x8xf32> -> tensor<1x4x1x1xf32>
  %mb = gpuc.broadcast %m : tensor<1x4x1x1xf32> -> tensor<2x4x8x8xf32>
  %c = gpuc.sub %a, %mb : tensor<2x4x8x8xf32>
  %r = gpuc.relu %c : tensor<2x4x8x8xf32>
  %z = gpuc.conv2d %r, %w2 strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<5x4x1x1xf32>) -> tensor<2x5x8x8xf32>
  return %z : tensor<2x5x8x8xf32>
}

// -----

// The gradients: backward-input's result and backward-filter's OIHW
// result are transposed back; a residual sum of two convolutions' NCHW
// results is taken in NHWC.
// CHECK-LABEL: func.func @gradients
// CHECK: %[[DY:.+]] = gpuc.transpose %arg0 perm = [0, 2, 3, 1]
// CHECK: %[[DX:.+]] = gpuc.conv2d_backward_input %[[DY]], %{{.+}} {{.*}} channels_last : (tensor<2x6x6x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x8x8x3xf32>
// CHECK: gpuc.transpose %[[DX]] perm = [0, 3, 1, 2] : tensor<2x8x8x3xf32> -> tensor<2x3x8x8xf32>
// CHECK: %[[DW:.+]] = gpuc.conv2d_backward_filter %{{.+}}, %[[DY]] {{.*}} channels_last : (tensor<2x8x8x3xf32>, tensor<2x6x6x4xf32>) -> tensor<4x3x3x3xf32>
// CHECK: gpuc.transpose %[[DW]] perm = [0, 3, 1, 2] : tensor<4x3x3x3xf32> -> tensor<4x3x3x3xf32>
func.func @gradients(%dy: tensor<2x4x6x6xf32>, %w: tensor<4x3x3x3xf32>, %x: tensor<2x3x8x8xf32>) -> (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) {
  %dx = gpuc.conv2d_backward_input %dy, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x4x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  %dw = gpuc.conv2d_backward_filter %x, %dy strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<2x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  return %dx, %dw : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
}

// -----

// Two branches summed and concatenated along the channels, then pooled
// globally without keep_dims: the sum is taken in NHWC, the concatenation
// along NHWC's channel axis, and the pool's [N, C] result needs no
// transpose at all.
// CHECK-LABEL: func.func @residual_concat_pool
// CHECK-NOT: gpuc.transpose %{{.+}} perm = [0, 3, 1, 2]
// CHECK: %[[S:.+]] = gpuc.add %{{.+}}, %{{.+}} : tensor<2x4x4x4xf32>
// CHECK: %[[C:.+]] = gpuc.concat %[[S]], %{{.+}} axis = 3 : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x8xf32>
// CHECK: %[[P:.+]] = gpuc.reduce_mean %[[C]] axes = [1, 2] : tensor<2x4x4x8xf32> -> tensor<2x8xf32>
// CHECK: return %[[P]]
func.func @residual_concat_pool(%x: tensor<2x3x4x4xf32>, %w1: tensor<4x3x1x1xf32>, %w2: tensor<4x3x1x1xf32>) -> tensor<2x8xf32> {
  %a = gpuc.conv2d %x, %w1 strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  %b = gpuc.conv2d %x, %w2 strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  %s = gpuc.add %a, %b : tensor<2x4x4x4xf32>
  %c = gpuc.concat %s, %b axis = 1 : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x8x4x4xf32>
  %p = gpuc.reduce_mean %c axes = [2, 3] : tensor<2x8x4x4xf32> -> tensor<2x8xf32>
  return %p : tensor<2x8xf32>
}

// -----

// A gradient that starts as a broadcast of a pooled gradient, scaled, into
// a ReLU's gradient: the broadcast and its scaling are taken in NHWC, so
// the select and the convolution's gradient need no transpose.
// CHECK-LABEL: func.func @broadcast_gradient
// CHECK: gpuc.conv2d {{.*}} channels_last
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.broadcast %{{.+}} : tensor<2x1x1x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.select %{{.+}}, %{{.+}}, %{{.+}} : tensor<2x4x4x4xi1>, tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.conv2d_backward_input {{.*}} channels_last
func.func @broadcast_gradient(%x: tensor<2x3x4x4xf32>, %w: tensor<4x3x1x1xf32>, %g: tensor<2x4x1x1xf32>) -> tensor<2x3x4x4xf32> {
  %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  %zero = gpuc.constant dense<0.0> : tensor<2x4x4x4xf32>
  %sixteenth = gpuc.constant dense<0.0625> : tensor<2x4x4x4xf32>
  %positive = gpuc.compare gt, %y, %zero : tensor<2x4x4x4xf32>
  %gb = gpuc.broadcast %g : tensor<2x4x1x1xf32> -> tensor<2x4x4x4xf32>
  %gs = gpuc.mul %gb, %sixteenth : tensor<2x4x4x4xf32>
  %dy = gpuc.select %positive, %gs, %zero : tensor<2x4x4x4xi1>, tensor<2x4x4x4xf32>
  %dx = gpuc.conv2d_backward_input %dy, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x4x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %dxr = gpuc.reshape %dx : tensor<2x3x4x4xf32> -> tensor<2x48xf32>
  %xr = gpuc.reshape %x : tensor<2x3x4x4xf32> -> tensor<2x48xf32>
  %out = gpuc.add %dxr, %xr : tensor<2x48xf32>
  %back = gpuc.reshape %out : tensor<2x48xf32> -> tensor<2x3x4x4xf32>
  return %back : tensor<2x3x4x4xf32>
}

// -----

// An operand that is neither a transpose nor cheap to transpose (a
// function argument) keeps the sum in NCHW: the transpose stays where it
// is rather than a second one being added.
// CHECK-LABEL: func.func @full_size_operand
// CHECK: %[[Y:.+]] = gpuc.conv2d {{.*}} channels_last
// CHECK: %[[T:.+]] = gpuc.transpose %[[Y]] perm = [0, 3, 1, 2]
// CHECK: gpuc.add %[[T]], %arg2 : tensor<2x4x4x4xf32>
func.func @full_size_operand(%x: tensor<2x3x4x4xf32>, %w: tensor<4x3x1x1xf32>, %r: tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> {
  %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  %s = gpuc.add %y, %r : tensor<2x4x4x4xf32>
  return %s : tensor<2x4x4x4xf32>
}

// -----

// Pooling windows between convolutions, and their gradients, take the
// channels-last form: no transpose is left between the convolutions.
// CHECK-LABEL: func.func @windows
// CHECK: gpuc.conv2d {{.*}} channels_last
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.max_pool2d %{{.+}} kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.max_pool2d_argmax %{{.+}} channels_last : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xi8>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.avg_pool2d %{{.+}} count_include_pad channels_last : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.conv2d {{.*}} channels_last
// CHECK: gpuc.avg_pool2d_backward %{{.+}} count_include_pad channels_last : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.max_pool2d_backward %{{.+}}, %{{.+}} {{.*}} channels_last : tensor<2x4x4x4xi8>, tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.conv2d_backward_input {{.*}} channels_last
func.func @windows(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %w2: tensor<4x4x1x1xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32>) {
  %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %m = gpuc.max_pool2d %y kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  %i = gpuc.max_pool2d_argmax %y kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xi8>
  %a = gpuc.avg_pool2d %m kernel = [2, 2] strides = [1, 1] pads = [1, 1, 0, 0] count_include_pad : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %z = gpuc.conv2d %a, %w2 strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %da = gpuc.avg_pool2d_backward %z kernel = [2, 2] strides = [1, 1] pads = [1, 1, 0, 0] count_include_pad : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %dm = gpuc.max_pool2d_backward %i, %da kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : tensor<2x4x4x4xi8>, tensor<2x4x4x4xf32> -> tensor<2x4x8x8xf32>
  %dx = gpuc.conv2d_backward_input %dm, %w strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  return %z, %dx : tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32>
}

// -----

// A flatten into a linear layer reads NCHW; its gradient comes back NCHW
// and is transposed once, into the pooling's gradient, so the ReLU's
// gradient and the convolution's run on NHWC tensors.
// CHECK-LABEL: func.func @flatten_gradient
// CHECK: %[[IN:.+]] = gpuc.transpose %arg3 perm = [0, 2, 3, 1] : tensor<2x4x2x2xf32> -> tensor<2x2x2x4xf32>
// CHECK-NEXT: %[[DP:.+]] = gpuc.avg_pool2d_backward %[[IN]] {{.*}} channels_last : tensor<2x2x2x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.select %{{.+}}, %[[DP]], %{{.+}} : tensor<2x4x4x4xi1>, tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.conv2d_backward_input {{.*}} channels_last
func.func @flatten_gradient(%x: tensor<2x3x4x4xf32>, %w: tensor<4x3x1x1xf32>, %zero: tensor<2x4x4x4xf32>, %dp: tensor<2x4x2x2xf32>) -> tensor<2x3x4x4xf32> {
  %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  %z = gpuc.constant dense<0.0> : tensor<2x4x4x4xf32>
  %positive = gpuc.compare gt, %y, %z : tensor<2x4x4x4xf32>
  %g = gpuc.avg_pool2d_backward %dp kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x4x2x2xf32> -> tensor<2x4x4x4xf32>
  %dy = gpuc.select %positive, %g, %z : tensor<2x4x4x4xi1>, tensor<2x4x4x4xf32>
  %dx = gpuc.conv2d_backward_input %dy, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x4x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  return %dx : tensor<2x3x4x4xf32>
}

// -----

// Without a convolution, windows keep their layout.
// CHECK-LABEL: func.func @no_convolution
// CHECK-NOT: channels_last
// CHECK-NOT: gpuc.transpose
func.func @no_convolution(%dp: tensor<2x4x2x2xf32>) -> tensor<2x4x4x4xf32> {
  %g = gpuc.avg_pool2d_backward %dp kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0] : tensor<2x4x2x2xf32> -> tensor<2x4x4x4xf32>
  return %g : tensor<2x4x4x4xf32>
}

// -----

// Other transposes (a head split, which gpuc-fold-layouts folds into a
// GEMM) stay beside their readers, in a model with convolutions too.
// CHECK-LABEL: func.func @other_transposes
// CHECK: %[[T:.+]] = gpuc.transpose %arg2 perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
// CHECK: gpuc.mul %[[T]], %{{.+}} : tensor<2x3x5x4xf32>
func.func @other_transposes(%x: tensor<2x3x4x4xf32>, %w: tensor<4x3x1x1xf32>, %q: tensor<2x5x3x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x3x5x4xf32>) {
  %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  %h = gpuc.transpose %q perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %half = gpuc.constant dense<0.5> : tensor<2x3x5x4xf32>
  %s = gpuc.mul %h, %half : tensor<2x3x5x4xf32>
  return %y, %s : tensor<2x4x4x4xf32>, tensor<2x3x5x4xf32>
}

// -----

// A slice along the channels of a convolution's result (a concatenation's
// gradient is such slices) into the next convolution: taken in NHWC, along
// axis 3, with no transpose between the two convolutions.
// CHECK-LABEL: func.func @slice_between_convolutions
// CHECK: gpuc.conv2d {{.*}} channels_last : (tensor<2x4x4x3xf32>, tensor<8x1x1x3xf32>) -> tensor<2x4x4x8xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.slice %{{.+}} starts = [0, 0, 0, 2] limits = [2, 4, 4, 6] strides = [1, 1, 1, 1] : tensor<2x4x4x8xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: gpuc.conv2d {{.*}} channels_last : (tensor<2x4x4x4xf32>, tensor<5x1x1x4xf32>) -> tensor<2x4x4x5xf32>
// CHECK: gpuc.transpose %{{.+}} perm = [0, 3, 1, 2] : tensor<2x4x4x5xf32> -> tensor<2x5x4x4xf32>
func.func @slice_between_convolutions(%x: tensor<2x3x4x4xf32>, %w1: tensor<8x3x1x1xf32>, %w2: tensor<5x4x1x1xf32>) -> tensor<2x5x4x4xf32> {
  %y = gpuc.conv2d %x, %w1 strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<8x3x1x1xf32>) -> tensor<2x8x4x4xf32>
  %s = gpuc.slice %y starts = [0, 2, 0, 0] limits = [2, 6, 4, 4] strides = [1, 1, 1, 1] : tensor<2x8x4x4xf32> -> tensor<2x4x4x4xf32>
  %z = gpuc.conv2d %s, %w2 strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x4x4x4xf32>, tensor<5x4x1x1xf32>) -> tensor<2x5x4x4xf32>
  return %z : tensor<2x5x4x4xf32>
}
