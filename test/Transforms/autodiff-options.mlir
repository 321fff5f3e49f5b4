// RUN: gpuc-opt %s --gpuc-autodiff="frozen=w1 trainable=idle" | FileCheck %s
// RUN: not gpuc-opt %s --gpuc-autodiff="frozen=nope" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not gpuc-opt %s --gpuc-autodiff="frozen=w1 trainable=w1" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not gpuc-opt %s --gpuc-autodiff="trainable=steps" 2>&1 | FileCheck %s --check-prefix=INT

// frozen= keeps a weight constant (fine-tuning a part of a model);
// trainable= trains a parameter no gradient reaches (it gets zeros, and
// optimizer state and weight decay as any weight).
gpuc.parameter @w1 trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
gpuc.parameter @w2 trainable : tensor<2xf32> = dense<1.0> : tensor<2xf32>
gpuc.parameter @idle : tensor<2xf32> = dense<1.0> : tensor<2xf32>
gpuc.parameter @steps : tensor<i64> = dense<0> : tensor<i64>
func.func @forward(%a: tensor<2xf32> {gpuc.param = @w1}, %b: tensor<2xf32> {gpuc.param = @w2}, %c: tensor<2xf32> {gpuc.param = @idle}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %p = gpuc.mul %a, %b : tensor<2xf32>
  %s = gpuc.reduce_sum %p axes = [0] : tensor<2xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK: gpuc.parameter @w1 : tensor<2xf32> = {{.+}} {gpuc.frozen = "frozen by request"}
// CHECK: gpuc.parameter @w2 trainable
// CHECK: gpuc.parameter @idle trainable
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<2xf32> {gpuc.grad = @w2}, tensor<2xf32> {gpuc.grad = @idle})
// CHECK: %[[ZERO:.+]] = gpuc.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: return %{{.+}}, %{{.+}}, %[[ZERO]]

// A name that is no parameter is an error that lists the parameters.
// UNKNOWN: error: gpuc-autodiff: no parameter named 'nope' to freeze or train; the model's parameters are: w1, w2, idle, steps
// BOTH: error: gpuc-autodiff: parameter 'w1' is named both frozen and trainable
// INT: error: gpuc-autodiff: parameter @steps holds 'tensor<i64>', and only floating-point parameters can be trained
