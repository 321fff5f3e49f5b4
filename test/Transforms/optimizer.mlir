// RUN: gpuc-opt %s --gpuc-optimizer="kind=sgd nesterov=true" | FileCheck %s --check-prefix=SGD
// RUN: gpuc-opt %s --gpuc-optimizer="kind=adamw lr=0.002" | FileCheck %s --check-prefix=ADAMW
// RUN: gpuc-opt %s --gpuc-accumulate-gradients=steps=4 --gpuc-optimizer="kind=sgd" | FileCheck %s --check-prefix=ACC

// The gradient result becomes the updated parameter; state is module-level
// parameters passed in and written back; hyperparameters are scalar
// arguments with their defaults.

// SGD: gpuc.parameter @optimizer.step : tensor<i64> = dense<0>
// SGD: gpuc.parameter @w.momentum_buffer : tensor<3xf32> = dense<0.000000e+00>
// SGD-LABEL: func.func @train_step
// SGD-SAME: %[[W:[a-z0-9]+]]: tensor<3xf32> {gpuc.param = @w}
// SGD-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {gpuc.param = @optimizer.step}
// SGD-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {gpuc.default = 1.000000e-02 : f64, gpuc.hyper = "lr"}
// SGD-SAME: {gpuc.default = 0.000000e+00 : f64, gpuc.hyper = "weight_decay"}
// SGD-SAME: {gpuc.default = 9.000000e-01 : f64, gpuc.hyper = "momentum"}
// SGD-SAME: {gpuc.default = 0.000000e+00 : f64, gpuc.hyper = "dampening"}
// SGD-SAME: %[[BUF:[a-z0-9]+]]: tensor<3xf32> {gpuc.param = @w.momentum_buffer}
// SGD-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<3xf32> {gpuc.update = @w}, tensor<3xf32> {gpuc.update = @w.momentum_buffer}, tensor<i64> {gpuc.update = @optimizer.step})
// The first step takes the gradient itself as the buffer, as PyTorch does.
// SGD: %[[FIRST:.+]] = gpuc.compare eq, %[[STEP]]
// SGD: %[[NEWBUF:.+]] = gpuc.select %{{.+}}, %{{.+}}, %{{.+}} : tensor<3xi1>, tensor<3xf32>
// Nesterov looks ahead along the new buffer.
// SGD: gpuc.mul %{{.+}}, %[[NEWBUF]]
// SGD: %[[NEWW:.+]] = gpuc.sub %[[W]]
// SGD: return %{{.+}}, %[[NEWW]], %[[NEWBUF]], %{{.+}}

// ADAMW: gpuc.parameter @w.exp_avg : tensor<3xf32>
// ADAMW: gpuc.parameter @w.exp_avg_sq : tensor<3xf32>
// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME: {gpuc.default = 2.000000e-03 : f64, gpuc.hyper = "lr"}
// ADAMW-SAME: {gpuc.default = 1.000000e-02 : f64, gpuc.hyper = "weight_decay"}
// ADAMW-SAME: gpuc.hyper = "beta1"
// ADAMW-SAME: gpuc.hyper = "beta2"
// ADAMW-SAME: gpuc.hyper = "epsilon"
// ADAMW-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<3xf32> {gpuc.update = @w}, tensor<3xf32> {gpuc.update = @w.exp_avg}, tensor<3xf32> {gpuc.update = @w.exp_avg_sq}, tensor<i64> {gpuc.update = @optimizer.step})
// Bias corrections use t = step + 1.
// ADAMW: %[[T:.+]] = gpuc.add %{{.+}}, %{{.+}} : tensor<i64>
// ADAMW: %[[TF:.+]] = gpuc.cast %[[T]] : tensor<i64> to tensor<f32>
// ADAMW: gpuc.pow %{{.+}}, %[[TF]] : tensor<f32>
// ADAMW: gpuc.sqrt %{{.+}} : tensor<3xf32>
// Gradient accumulation: the step adds its gradient into @w.grad_accum and
// changes no parameter; @apply_update updates @w from the accumulator's
// mean and zeroes it, with the step counter and the hyperparameters.
// ACC: gpuc.parameter @w.grad_accum : tensor<3xf32> = dense<0.000000e+00>
// ACC-LABEL: func.func @train_step
// ACC-SAME: %[[ACC:[a-z0-9]+]]: tensor<3xf32> {gpuc.param = @w.grad_accum}
// ACC-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<3xf32> {gpuc.update = @w.grad_accum})
// ACC: %[[SUM:.+]] = gpuc.add %[[ACC]], %{{.+}} : tensor<3xf32>
// ACC: return %{{.+}}, %[[SUM]]
// ACC-LABEL: func.func @apply_update
// ACC-SAME: %[[W:[a-z0-9]+]]: tensor<3xf32> {gpuc.param = @w}
// ACC-SAME: %[[A:[a-z0-9]+]]: tensor<3xf32> {gpuc.param = @w.grad_accum}
// ACC-SAME: {gpuc.param = @optimizer.step}
// ACC-SAME: gpuc.hyper = "lr"
// ACC-SAME: -> (tensor<3xf32> {gpuc.update = @w.grad_accum}, tensor<3xf32> {gpuc.update = @w}, tensor<3xf32> {gpuc.update = @w.momentum_buffer}, tensor<i64> {gpuc.update = @optimizer.step})
// ACC: %[[QUARTER:.+]] = gpuc.constant dense<2.500000e-01> : tensor<3xf32>
// ACC: %[[MEAN:.+]] = gpuc.mul %[[A]], %[[QUARTER]]
// ACC: %[[ZERO:.+]] = gpuc.constant dense<0.000000e+00> : tensor<3xf32>
// ACC: %[[NEWW:.+]] = gpuc.sub %[[W]]
// ACC: return %[[ZERO]], %[[NEWW]]
gpuc.parameter @w trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @train_step(%w: tensor<3xf32> {gpuc.param = @w}, %l: tensor<f32> {gpuc.input = "l"}, %g: tensor<3xf32> {gpuc.input = "g"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<3xf32> {gpuc.grad = @w}) {
  return %l, %g : tensor<f32>, tensor<3xf32>
}
