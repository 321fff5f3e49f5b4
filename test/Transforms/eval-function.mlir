// RUN: gpuc-opt %s --gpuc-eval-function -split-input-file -verify-diagnostics | FileCheck %s

// @eval: dropout is the identity, batch norm reads the running statistics,
// the state updates and the unused RNG key are gone; @forward is unchanged.

module {
  gpuc.parameter @bn.weight trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  gpuc.parameter @bn.bias trainable : tensor<2xf32> = dense<0.0> : tensor<2xf32>
  gpuc.parameter @bn.running_mean : tensor<2xf32> = dense<0.0> : tensor<2xf32>
  gpuc.parameter @bn.running_var : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  func.func @forward(%x: tensor<4x2x3x3xf32> {gpuc.input = "image"}, %g: tensor<2xf32> {gpuc.param = @bn.weight}, %b: tensor<2xf32> {gpuc.param = @bn.bias}, %rm: tensor<2xf32> {gpuc.param = @bn.running_mean}, %rv: tensor<2xf32> {gpuc.param = @bn.running_var}, %key: tensor<2xi64> {gpuc.rng}) -> (tensor<4x2x3x3xf32> {gpuc.output = "y"}, tensor<2xf32> {gpuc.update = @bn.running_mean}, tensor<2xf32> {gpuc.update = @bn.running_var}) {
    %y, %m, %v = gpuc.batch_norm_train %x, %g, %b, %rm, %rv epsilon = 1.0e-05 momentum = 9.0e-01 : tensor<4x2x3x3xf32>, tensor<2xf32>
    %d = gpuc.dropout %y, %key stream = 0 ratio = 1.0e-01 : tensor<4x2x3x3xf32>
    return %d, %m, %v : tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>
  }
}

// CHECK-LABEL: func.func @forward
// CHECK: gpuc.batch_norm_train
// CHECK: gpuc.dropout
// CHECK-LABEL: func.func @eval
// CHECK-SAME: (%[[X:.+]]: tensor<4x2x3x3xf32> {gpuc.input = "image"}, %[[G:.+]]: tensor<2xf32> {gpuc.param = @bn.weight}, %[[B:.+]]: tensor<2xf32> {gpuc.param = @bn.bias}, %[[RM:.+]]: tensor<2xf32> {gpuc.param = @bn.running_mean}, %[[RV:.+]]: tensor<2xf32> {gpuc.param = @bn.running_var})
// CHECK-SAME: -> (tensor<4x2x3x3xf32> {gpuc.output = "y"})
// CHECK-NOT: gpuc.dropout
// CHECK-NOT: gpuc.batch_norm_train
// CHECK: %[[VAR:.+]] = gpuc.add %[[RV]], %{{.+}} : tensor<2xf32>
// CHECK: %[[RSTD:.+]] = gpuc.rsqrt %[[VAR]]
// CHECK: gpuc.reshape %[[RM]]
// CHECK: %[[C:.+]] = gpuc.sub %[[X]], %{{.+}}
// CHECK: gpuc.mul %[[C]], %{{.+}}
// CHECK: return %{{.+}} : tensor<4x2x3x3xf32>

// -----

// expected-error @below {{gpuc-eval-function: the module has no @forward}}
module {
  func.func @other() {
    return
  }
}
