// RUN: gpuc-opt %s --split-input-file --gpuc-accumulate-gradients=steps=4 | FileCheck %s
// RUN: gpuc-opt %s --split-input-file --gpuc-accumulate-gradients=steps=1 | FileCheck %s --check-prefix=ONE

// The step adds each gradient into its accumulator (optimizer state) and
// returns the sum; @apply_update returns the accumulators' mean as the
// gradients (what gpuc-data-parallel and gpuc-optimizer then read) and
// zeroes them.
// CHECK: gpuc.parameter @w.grad_accum : tensor<2x3xf32> = dense<0.000000e+00> : tensor<2x3xf32> {gpuc.optimizer_state}
// CHECK: gpuc.parameter @b.grad_accum : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {gpuc.optimizer_state}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[AW:[a-z0-9]+]]: tensor<2x3xf32> {gpuc.param = @w.grad_accum}, %[[AB:[a-z0-9]+]]: tensor<3xf32> {gpuc.param = @b.grad_accum}
// CHECK-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<2x3xf32> {gpuc.update = @w.grad_accum}, tensor<3xf32> {gpuc.update = @b.grad_accum})
// CHECK: %[[SW:.+]] = gpuc.add %[[AW]], %{{.+}} : tensor<2x3xf32>
// CHECK: %[[SB:.+]] = gpuc.add %[[AB]], %{{.+}} : tensor<3xf32>
// CHECK: return %{{.+}}, %[[SW]], %[[SB]]
// CHECK-LABEL: func.func @apply_update
// CHECK-SAME: (%[[W:[a-z0-9]+]]: tensor<2x3xf32> {gpuc.param = @w}, %[[A:[a-z0-9]+]]: tensor<2x3xf32> {gpuc.param = @w.grad_accum}, %{{.+}}: tensor<3xf32> {gpuc.param = @b}, %[[B:[a-z0-9]+]]: tensor<3xf32> {gpuc.param = @b.grad_accum})
// CHECK-SAME: -> (tensor<2x3xf32> {gpuc.grad = @w}, tensor<3xf32> {gpuc.grad = @b}, tensor<2x3xf32> {gpuc.update = @w.grad_accum}, tensor<3xf32> {gpuc.update = @b.grad_accum})
// CHECK: %[[QW:.+]] = gpuc.constant dense<2.500000e-01> : tensor<2x3xf32>
// CHECK: %[[MW:.+]] = gpuc.mul %[[A]], %[[QW]]
// CHECK: %[[ZW:.+]] = gpuc.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK: %[[MB:.+]] = gpuc.mul %[[B]], %{{.+}}
// CHECK: %[[ZB:.+]] = gpuc.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %[[MW]], %[[MB]], %[[ZW]], %[[ZB]]

// With one step per update the module is unchanged.
// ONE-NOT: grad_accum
// ONE-NOT: apply_update
gpuc.parameter @w trainable : tensor<2x3xf32> = dense<1.0> : tensor<2x3xf32>
gpuc.parameter @b trainable : tensor<3xf32> = dense<0.0> : tensor<3xf32>
func.func @train_step(%w: tensor<2x3xf32> {gpuc.param = @w}, %b: tensor<3xf32> {gpuc.param = @b}, %gw: tensor<2x3xf32> {gpuc.input = "gw"}, %gb: tensor<3xf32> {gpuc.input = "gb"}, %l: tensor<f32> {gpuc.input = "l"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<2x3xf32> {gpuc.grad = @w}, tensor<3xf32> {gpuc.grad = @b}) {
  %dw = gpuc.relu %gw : tensor<2x3xf32>
  %db = gpuc.relu %gb : tensor<3xf32>
  return %l, %dw, %db : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>
}
