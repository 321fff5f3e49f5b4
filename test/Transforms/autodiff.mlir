// RUN: gpuc-opt %s --gpuc-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// A linear layer, ReLU and cross-entropy: gradients for the parameters only
// (none for the input x or the labels), each op adding its own rule.

gpuc.parameter @w trainable : tensor<3x4xf32> = dense<0.5> : tensor<3x4xf32>
gpuc.parameter @b trainable : tensor<3xf32> = dense<0.0> : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32> {gpuc.input = "x"}, %w: tensor<3x4xf32> {gpuc.param = @w}, %b: tensor<3xf32> {gpuc.param = @b}, %l: tensor<2xi64> {gpuc.input = "label"}) -> (tensor<2x3xf32> {gpuc.output = "logits"}, tensor<f32> {gpuc.output = "loss"}) {
  %0 = gpuc.matmul %x, %w transpose_rhs : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %1 = gpuc.broadcast %b : tensor<3xf32> -> tensor<2x3xf32>
  %2 = gpuc.add %0, %1 : tensor<2x3xf32>
  %3 = gpuc.relu %2 : tensor<2x3xf32>
  %4 = gpuc.cross_entropy %3, %l reduction = mean : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %3, %4 : tensor<2x3xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @forward
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4xf32> {gpuc.input = "x"}
// CHECK-SAME: %[[L:[a-z0-9]+]]: tensor<2xi64> {gpuc.input = "label"}
// CHECK-SAME: -> (tensor<2x3xf32> {gpuc.output = "logits"}, tensor<f32> {gpuc.output = "loss"}, tensor<3x4xf32> {gpuc.grad = @w}, tensor<3xf32> {gpuc.grad = @b})
// CHECK: %[[PRE:.+]] = gpuc.add
// CHECK: %[[ACT:.+]] = gpuc.relu %[[PRE]]
// CHECK: %[[LOSS:.+]] = gpuc.cross_entropy %[[ACT]], %[[L]]
// Cross-entropy: (softmax - one_hot(labels)) / N.
// CHECK: %[[P:.+]] = gpuc.softmax %[[ACT]] axis = 1
// CHECK: %[[CLASSES:.+]] = gpuc.iota dim = 1 : tensor<2x3xi64>
// CHECK: %[[HOT:.+]] = gpuc.compare eq, %[[CLASSES]]
// CHECK: %[[HOTF:.+]] = gpuc.cast %[[HOT]]
// CHECK: %[[DIFF:.+]] = gpuc.sub %[[P]], %[[HOTF]]
// CHECK: %[[DLOGITS:.+]] = gpuc.mul %[[DIFF]]
// ReLU passes the gradient where its output is positive (exactly where its
// input is), so backward reads the result it keeps anyway.
// CHECK: %[[POS:.+]] = gpuc.compare gt, %[[ACT]]
// CHECK: %[[DPRE:.+]] = gpuc.select %[[POS]], %[[DLOGITS]]
// Broadcast: summed back over the batch. Matmul: only the weight's product.
// CHECK: %[[DB:.+]] = gpuc.reduce_sum %[[DPRE]] axes = [0] : tensor<2x3xf32> -> tensor<3xf32>
// CHECK: %[[DW:.+]] = gpuc.matmul %[[DPRE]], %[[X]] transpose_lhs : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NOT: gpuc.matmul
// CHECK: return %[[ACT]], %[[LOSS]], %[[DW]], %[[DB]]

// -----

// Dropout's gradient is the same dropout (same key and stream) of the
// incoming gradient. A parameter that does not reach the loss is a buffer,
// not a weight: frozen (no gradient result, no longer trainable), so the
// optimizer gives it no state and no weight decay.
gpuc.parameter @a trainable : tensor<4xf32> = dense<1.0> : tensor<4xf32>
gpuc.parameter @unused trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
func.func @forward(%a: tensor<4xf32> {gpuc.param = @a}, %u: tensor<2xf32> {gpuc.param = @unused}, %key: tensor<2xi64> {gpuc.rng}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %d = gpuc.dropout %a, %key stream = 7 ratio = 0.25 : tensor<4xf32>
  %s = gpuc.reduce_sum %d axes = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK: gpuc.parameter @a trainable
// CHECK: gpuc.parameter @unused : tensor<2xf32> = {{.+}} {gpuc.frozen = "no gradient reaches it (it reaches the loss through no differentiable op)"}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[KEY:[a-z0-9]+]]: tensor<2xi64> {gpuc.rng}
// CHECK-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<4xf32> {gpuc.grad = @a})
// The seed gradient folds through reshape and broadcast to a constant.
// CHECK: %[[G:.+]] = gpuc.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK: %[[DA:.+]] = gpuc.dropout %[[G]], %[[KEY]] stream = 7 ratio = 2.500000e-01
// CHECK: return %{{.+}}, %[[DA]] :

// -----

gpuc.parameter @a trainable : tensor<4xf32> = dense<1.0> : tensor<4xf32>
// expected-error @+1 {{no scalar output named 'loss' to differentiate}}
func.func @forward(%a: tensor<4xf32> {gpuc.param = @a}) -> (tensor<4xf32> {gpuc.output = "y"}) {
  return %a : tensor<4xf32>
}

// -----

// A parameter read only by a comparison (a causal mask registered as a
// buffer, `mask == 0`) reaches the loss through no differentiable op: it is
// frozen, not given a zero gradient, and nothing is said about it (the
// compile report lists it).
gpuc.parameter @mask trainable : tensor<4xf32> = dense<1.0> : tensor<4xf32>
gpuc.parameter @w trainable : tensor<4xf32> = dense<2.0> : tensor<4xf32>
func.func @forward(%m: tensor<4xf32> {gpuc.param = @mask}, %w: tensor<4xf32> {gpuc.param = @w}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %z = gpuc.constant dense<0.0> : tensor<4xf32>
  %c = gpuc.compare eq, %m, %z : tensor<4xf32>
  %y = gpuc.select %c, %z, %w : tensor<4xi1>, tensor<4xf32>
  %s = gpuc.reduce_sum %y axes = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK: gpuc.parameter @mask : tensor<4xf32> = {{.+}} {gpuc.frozen = "no gradient reaches it
// CHECK: gpuc.parameter @w trainable
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<4xf32> {gpuc.grad = @w})

// -----

// Backward ops have no gradient rule of their own (no second derivatives),
// but for conv2d_backward_input (ONNX's ConvTranspose).
gpuc.parameter @g trainable : tensor<1x1x2x2xf32> = dense<1.0> : tensor<1x1x2x2xf32>
func.func @forward(%x: tensor<1x1x2x2xf32> {gpuc.input = "x"}, %g: tensor<1x1x2x2xf32> {gpuc.param = @g}) -> (tensor<f32> {gpuc.output = "loss"}) {
  // expected-error @+1 {{'gpuc.conv2d_backward_filter' op is not differentiable, but the loss depends on a trainable parameter through it}}
  %d = gpuc.conv2d_backward_filter %x, %g strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  %s = gpuc.reduce_sum %d axes = [0, 1, 2, 3] : tensor<1x1x1x1xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// conv2d_backward_input (ONNX's ConvTranspose) is linear in both operands:
// its input's gradient is the forward convolution of the result's gradient,
// its filter's the filter gradient with the roles of input and output
// gradient exchanged.
gpuc.parameter @w trainable : tensor<1x1x1x1xf32> = dense<1.0> : tensor<1x1x1x1xf32>
func.func @forward(%x: tensor<1x1x2x2xf32> {gpuc.input = "x"}, %w: tensor<1x1x1x1xf32> {gpuc.param = @w}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %d = gpuc.conv2d_backward_input %x, %w strides = [2, 2] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
  %s = gpuc.reduce_sum %d axes = [0, 1, 2, 3] : tensor<1x1x3x3xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK-LABEL: func.func @train_step(%arg0: tensor<1x1x2x2xf32> {gpuc.input = "x"}, %arg1: tensor<1x1x1x1xf32> {gpuc.param = @w})
// CHECK: %[[G:.+]] = gpuc.constant dense<1.000000e+00> : tensor<1x1x3x3xf32>
// CHECK: %[[DW:.+]] = gpuc.conv2d_backward_filter %[[G]], %arg0 strides = [2, 2] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
// CHECK: return %{{.+}}, %[[DW]]


// -----

// A product of bf16 operands stored in f32: its gradient is rounded to the
// operands' type once, and both gradient products take it.
gpuc.parameter @w trainable : tensor<3x4xbf16> = dense<0.5> : tensor<3x4xbf16>
func.func @forward(%x: tensor<2x4xbf16> {gpuc.input = "x"}, %w: tensor<3x4xbf16> {gpuc.param = @w}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %0 = gpuc.matmul %x, %w transpose_rhs : (tensor<2x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3xf32>
  %1 = gpuc.reduce_sum %0 axes = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK: %[[G:.+]] = gpuc.constant dense<1.000000e+00> : tensor<2x3xf32>
// CHECK: %[[GL:.+]] = gpuc.cast %[[G]] : tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK: %[[DW:.+]] = gpuc.matmul %[[GL]], %{{.+}} transpose_lhs : (tensor<2x3xbf16>, tensor<2x4xbf16>) -> tensor<3x4xbf16>
// CHECK: return {{.*}}%[[DW]]

// -----

// A batch norm's gradient reduces two values a channel, g and g·x̂ (γ,
// constant along a channel, factored out of the means its input gradient
// subtracts): their means, and their sums, the scale and bias gradients.
// The means are reduce_mean's, rounded once from the sum.
gpuc.parameter @g trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
gpuc.parameter @b trainable : tensor<2xf32> = dense<0.0> : tensor<2xf32>
gpuc.parameter @w trainable : tensor<4x2x3x3xf32> = dense<2.0> : tensor<4x2x3x3xf32>
func.func @forward(%x: tensor<4x2x3x3xf32> {gpuc.input = "x"}, %g: tensor<2xf32> {gpuc.param = @g}, %b: tensor<2xf32> {gpuc.param = @b}, %w: tensor<4x2x3x3xf32> {gpuc.param = @w}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %xw = gpuc.mul %x, %w : tensor<4x2x3x3xf32>
  %rm = gpuc.constant dense<0.0> : tensor<2xf32>
  %rv = gpuc.constant dense<1.0> : tensor<2xf32>
  %y, %m, %v = gpuc.batch_norm_train %xw, %g, %b, %rm, %rv epsilon = 1.0e-05 momentum = 9.0e-01 : tensor<4x2x3x3xf32>, tensor<2xf32>
  %sq = gpuc.mul %y, %y : tensor<4x2x3x3xf32>
  %l = gpuc.reduce_sum %sq axes = [0, 1, 2, 3] : tensor<4x2x3x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK-LABEL: func.func @train_step
// CHECK: gpuc.rsqrt
// CHECK: %[[XHAT:.+]] = gpuc.mul
// CHECK: %[[GXHAT:.+]] = gpuc.mul %[[G:[0-9]+]], %[[XHAT]]
// CHECK-NEXT: gpuc.reduce_mean %[[G]] axes = [0, 2, 3] keep_dims
// CHECK-NEXT: gpuc.reduce_mean %[[GXHAT]] axes = [0, 2, 3] keep_dims
// CHECK-NOT: gpuc.reduce_
// CHECK: %[[GXHAT2:.+]] = gpuc.mul %[[G]], %[[XHAT]]
// CHECK-NEXT: %[[DSCALE:.+]] = gpuc.reduce_sum %[[GXHAT2]] axes = [0, 2, 3] : tensor<4x2x3x3xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[DBIAS:.+]] = gpuc.reduce_sum %[[G]] axes = [0, 2, 3] : tensor<4x2x3x3xf32> -> tensor<2xf32>
// CHECK-NOT: gpuc.reduce_
// CHECK: return {{.*}}, %[[DSCALE]], %[[DBIAS]], {{.*}} : tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<4x2x3x3xf32>

// -----

// A strided slice (rows 1 and 3 of 5, columns 0 and 2 of 4): its gradient
// pads each strided axis as rows of the stride, [2, 1] to [3, 2] (the
// elements' row from start / stride, their column start % stride), merges
// them (6 rows, 4 columns) and drops the row past the input's 5.
gpuc.parameter @p trainable : tensor<5x4xf32> = dense<1.0> : tensor<5x4xf32>
func.func @forward(%p: tensor<5x4xf32> {gpuc.param = @p}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %s = gpuc.slice %p starts = [1, 0] limits = [5, 4] strides = [2, 2] : tensor<5x4xf32> -> tensor<2x2xf32>
  %sq = gpuc.mul %s, %s : tensor<2x2xf32>
  %l = gpuc.reduce_sum %sq axes = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DS:.+]] = gpuc.add
// CHECK-NEXT: %[[SPLIT:.+]] = gpuc.reshape %[[DS]] : tensor<2x2xf32> -> tensor<2x1x2x1xf32>
// CHECK-NEXT: %[[PAD:.+]] = gpuc.pad %[[SPLIT]] low = [0, 1, 0, 0] high = [1, 0, 0, 1] value = 0.000000e+00 : tensor<2x1x2x1xf32> -> tensor<3x2x2x2xf32>
// CHECK-NEXT: %[[MERGED:.+]] = gpuc.reshape %[[PAD]] : tensor<3x2x2x2xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[DP:.+]] = gpuc.slice %[[MERGED]] starts = [0, 0] limits = [5, 4] strides = [1, 1] : tensor<6x4xf32> -> tensor<5x4xf32>
// CHECK: return {{.*}}, %[[DP]] : tensor<f32>, tensor<5x4xf32>
