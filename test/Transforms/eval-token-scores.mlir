// RUN: gpuc-opt %s --gpuc-eval-token-scores="output=logits labels=label" -split-input-file -verify-diagnostics | FileCheck %s

// A language model's @eval: the logits of a biased linear head become its
// summed loss and correct count, against the training step's labels.

module {
  gpuc.parameter @head.weight trainable : tensor<5x4xf32> = dense<0.0> : tensor<5x4xf32>
  gpuc.parameter @head.bias trainable : tensor<5xf32> = dense<0.0> : tensor<5xf32>
  func.func @forward(%h: tensor<6x4xf32> {gpuc.input = "h"}, %y: tensor<2x3xi64> {gpuc.input = "label"}) -> (tensor<f32> {gpuc.output = "loss"}) {
    %0 = gpuc.reduce_sum %h axes = [0, 1] : tensor<6x4xf32> -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func @eval(%h: tensor<6x4xf32> {gpuc.input = "h"}, %w: tensor<5x4xf32> {gpuc.param = @head.weight}, %b: tensor<5xf32> {gpuc.param = @head.bias}) -> (tensor<2x3x5xf32> {gpuc.output = "logits"}) {
    %z = gpuc.matmul %h, %w transpose_rhs : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
    %r = gpuc.reshape %z : tensor<6x5xf32> -> tensor<2x3x5xf32>
    %bb = gpuc.broadcast %b : tensor<5xf32> -> tensor<2x3x5xf32>
    %l = gpuc.add %bb, %r : tensor<2x3x5xf32>
    return %l : tensor<2x3x5xf32>
  }
}

// CHECK-LABEL: func.func @eval
// CHECK-SAME: (%[[H:.+]]: tensor<6x4xf32> {gpuc.input = "h"}, %[[W:.+]]: tensor<5x4xf32> {gpuc.param = @head.weight}, %[[B:.+]]: tensor<5xf32> {gpuc.param = @head.bias}, %[[Y:.+]]: tensor<2x3xi64> {gpuc.input = "label"})
// CHECK-SAME: -> (tensor<f32> {gpuc.output = "logits.loss_sum"}, tensor<f32> {gpuc.output = "logits.correct"})
// CHECK-NOT: gpuc.matmul
// CHECK: %[[ROWS:.+]] = gpuc.reshape %[[Y]] : tensor<2x3xi64> -> tensor<6xi64>
// CHECK: %[[LOSS:.+]], %[[CORRECT:.+]] = gpuc.linear_token_scores %[[H]], %[[W]], %[[ROWS]] bias %[[B]] : tensor<5xf32> ignore_index = -1 : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<f32>)
// CHECK-NOT: gpuc.add
// CHECK: return %[[LOSS]], %[[CORRECT]]

// -----

// A weight stored [C, V] (a MatMul against it) is transposed for the op;
// without @forward the labels are i64.

module {
  gpuc.parameter @head.weight trainable : tensor<4x7xf32> = dense<0.0> : tensor<4x7xf32>
  func.func @eval(%h: tensor<2x2x4xf32> {gpuc.input = "h"}, %w: tensor<4x7xf32> {gpuc.param = @head.weight}) -> (tensor<2x2x7xf32> {gpuc.output = "logits"}, tensor<2x2x4xf32> {gpuc.output = "hidden"}) {
    %rows = gpuc.reshape %h : tensor<2x2x4xf32> -> tensor<4x4xf32>
    %z = gpuc.matmul %rows, %w : (tensor<4x4xf32>, tensor<4x7xf32>) -> tensor<4x7xf32>
    %l = gpuc.reshape %z : tensor<4x7xf32> -> tensor<2x2x7xf32>
    return %l, %h : tensor<2x2x7xf32>, tensor<2x2x4xf32>
  }
}

// CHECK-LABEL: func.func @eval
// CHECK-SAME: %[[Y:[^:]+]]: tensor<2x2xi64> {gpuc.input = "label"})
// CHECK-SAME: -> (tensor<2x2x4xf32> {gpuc.output = "hidden"}, tensor<f32> {gpuc.output = "logits.loss_sum"}, tensor<f32> {gpuc.output = "logits.correct"})
// CHECK: %[[ROWS:.+]] = gpuc.reshape %{{.+}} : tensor<2x2x4xf32> -> tensor<4x4xf32>
// CHECK: %[[WT:.+]] = gpuc.transpose %{{.+}} perm = [1, 0] : tensor<4x7xf32> -> tensor<7x4xf32>
// CHECK: gpuc.linear_token_scores %[[ROWS]], %[[WT]], %{{.+}} ignore_index = -1 : (tensor<4x4xf32>, tensor<7x4xf32>, tensor<4xi64>)

// -----

// The labels take the type the training step's have (i32 here), and an
// @eval that already reads them reads them once.

module {
  gpuc.parameter @head.weight trainable : tensor<5x4xf32> = dense<0.0> : tensor<5x4xf32>
  func.func @forward(%h: tensor<6x4xf32> {gpuc.input = "h"}, %y: tensor<2x3xi32> {gpuc.input = "label"}) -> (tensor<f32> {gpuc.output = "loss"}) {
    %0 = gpuc.reduce_sum %h axes = [0, 1] : tensor<6x4xf32> -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func @eval(%h: tensor<6x4xf32> {gpuc.input = "h"}, %w: tensor<5x4xf32> {gpuc.param = @head.weight}) -> (tensor<2x3x5xf32> {gpuc.output = "logits"}) {
    %z = gpuc.matmul %h, %w transpose_rhs : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
    %r = gpuc.reshape %z : tensor<6x5xf32> -> tensor<2x3x5xf32>
    return %r : tensor<2x3x5xf32>
  }
}

// CHECK-LABEL: func.func @eval
// CHECK-SAME: %{{.+}}: tensor<2x3xi32> {gpuc.input = "label"})
// CHECK: gpuc.linear_token_scores %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -1 : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<6xi32>)

// -----

// Logits that are not a linear layer's stay @eval's output.

module {
  gpuc.parameter @head.weight trainable : tensor<5x4xf32> = dense<0.0> : tensor<5x4xf32>
  func.func @eval(%h: tensor<6x4xf32> {gpuc.input = "h"}, %w: tensor<5x4xf32> {gpuc.param = @head.weight}) -> (tensor<2x3x5xf32> {gpuc.output = "logits"}) {
    %z = gpuc.matmul %h, %w transpose_rhs : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
    %t = gpuc.tanh %z : tensor<6x5xf32>
    %r = gpuc.reshape %t : tensor<6x5xf32> -> tensor<2x3x5xf32>
    return %r : tensor<2x3x5xf32>
  }
}

// CHECK-LABEL: func.func @eval
// CHECK-SAME: (%{{.+}}: tensor<6x4xf32> {gpuc.input = "h"}, %{{.+}}: tensor<5x4xf32> {gpuc.param = @head.weight}) -> (tensor<2x3x5xf32> {gpuc.output = "logits"})
// CHECK-NOT: gpuc.linear_token_scores
// CHECK: gpuc.tanh
// CHECK: return %{{.+}} : tensor<2x3x5xf32>

// -----

module {
  // expected-error @below {{gpuc-eval-token-scores: @eval has no output 'logits'}}
  func.func @eval(%h: tensor<6x4xf32> {gpuc.input = "h"}) -> (tensor<6x4xf32> {gpuc.output = "y"}) {
    return %h : tensor<6x4xf32>
  }
}

// -----

module {
  gpuc.parameter @head.weight trainable : tensor<5x4xf32> = dense<0.0> : tensor<5x4xf32>
  // expected-error @below {{gpuc-eval-token-scores: the labels 'label' ('tensor<6xi64>') are not integers shaped as the logits 'logits' without their classes ('tensor<2x3xi64>')}}
  func.func @forward(%h: tensor<6x4xf32> {gpuc.input = "h"}, %y: tensor<6xi64> {gpuc.input = "label"}) -> (tensor<f32> {gpuc.output = "loss"}) {
    %0 = gpuc.reduce_sum %h axes = [0, 1] : tensor<6x4xf32> -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func @eval(%h: tensor<6x4xf32> {gpuc.input = "h"}, %w: tensor<5x4xf32> {gpuc.param = @head.weight}) -> (tensor<2x3x5xf32> {gpuc.output = "logits"}) {
    %z = gpuc.matmul %h, %w transpose_rhs : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
    %r = gpuc.reshape %z : tensor<6x5xf32> -> tensor<2x3x5xf32>
    return %r : tensor<2x3x5xf32>
  }
}

// -----

// expected-error @below {{gpuc-eval-token-scores: the module has no @eval}}
module {
}
