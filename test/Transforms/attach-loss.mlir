// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-attach-loss="target=logits" | FileCheck %s
// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-attach-loss="target=logits class-axis=-1" | FileCheck %s --check-prefix=LAST
// RUN: gpuc-opt %s --split-input-file --verify-diagnostics --gpuc-attach-loss="target=logits loss=mse labels=y" | FileCheck %s --check-prefix=MSE

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x5xf32> {gpuc.input = "x"}
// CHECK-SAME: %[[LABEL:[a-z0-9]+]]: tensor<2x5xi64> {gpuc.input = "label"}
// CHECK-SAME: -> (tensor<2x3x5xf32> {gpuc.output = "logits"}, tensor<f32> {gpuc.output = "loss"})
// CHECK: %[[LOSS:.+]] = gpuc.cross_entropy %[[X]], %[[LABEL]] reduction = mean : (tensor<2x3x5xf32>, tensor<2x5xi64>) -> tensor<f32>
// CHECK: return %[[X]], %[[LOSS]]

// The classes on the last axis (a language model): rows of [2 * 3, 5], views
// of the same buffers, not a transpose.
// LAST-LABEL: func.func @forward
// LAST-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x5xf32> {gpuc.input = "x"}
// LAST-SAME: %[[LABEL:[a-z0-9]+]]: tensor<2x3xi64> {gpuc.input = "label"}
// LAST-NOT: gpuc.transpose
// LAST: %[[ROWS:.+]] = gpuc.reshape %[[X]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// LAST: %[[LABELS:.+]] = gpuc.reshape %[[LABEL]] : tensor<2x3xi64> -> tensor<6xi64>
// LAST: gpuc.cross_entropy %[[ROWS]], %[[LABELS]] reduction = mean : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>

// MSE-LABEL: func.func @forward
// MSE-SAME: %[[Y:[a-z0-9]+]]: tensor<2x3x5xf32> {gpuc.input = "y"}
// MSE: gpuc.mse_loss %{{.+}}, %[[Y]] reduction = mean
func.func @forward(%x: tensor<2x3x5xf32> {gpuc.input = "x"}) -> (tensor<2x3x5xf32> {gpuc.output = "logits"}) {
  return %x : tensor<2x3x5xf32>
}

// -----

// expected-error @+1 {{the model has no output named 'logits' (outputs: probs)}}
func.func @forward(%x: tensor<2x3xf32> {gpuc.input = "x"}) -> (tensor<2x3xf32> {gpuc.output = "probs"}) {
  return %x : tensor<2x3xf32>
}

// -----

// expected-error @+1 {{the model already returns an output named 'loss'; train it without --loss}}
func.func @forward(%x: tensor<2x3xf32> {gpuc.input = "x"}, %s: tensor<f32> {gpuc.input = "s"}) -> (tensor<2x3xf32> {gpuc.output = "logits"}, tensor<f32> {gpuc.output = "loss"}) {
  return %x, %s : tensor<2x3xf32>, tensor<f32>
}

// -----

// No class axis given and an integer input shaped like the output without
// its last axis (tokens [B, T], logits [B, T, V]): the classes are last.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TOKENS:[a-z0-9]+]]: tensor<2x3xi64> {gpuc.input = "tokens"}
// CHECK-SAME: %[[LABEL:[a-z0-9]+]]: tensor<2x3xi64> {gpuc.input = "label"}
// CHECK: %[[ROWS:.+]] = gpuc.reshape %{{.+}} : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK: gpuc.cross_entropy %[[ROWS]], %{{.+}} reduction = mean : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
func.func @forward(%tokens: tensor<2x3xi64> {gpuc.input = "tokens"}, %x: tensor<2x3x5xf32> {gpuc.input = "x"}) -> (tensor<2x3x5xf32> {gpuc.output = "logits"}) {
  return %x : tensor<2x3x5xf32>
}
