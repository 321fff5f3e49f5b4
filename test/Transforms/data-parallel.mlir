// RUN: gpuc-opt %s --split-input-file --gpuc-data-parallel | FileCheck %s
// RUN: gpuc-opt %s --split-input-file --gpuc-data-parallel=bucket-size=32 | FileCheck %s --check-prefix=SMALL
// RUN: gpuc-opt %s --split-input-file --gpuc-data-parallel --gpuc-optimizer | FileCheck %s --check-prefix=OPT
// RUN: gpuc-opt %s --split-input-file --gpuc-data-parallel=shard-ranks=3 | FileCheck %s --check-prefix=SHARD
// RUN: gpuc-opt %s --split-input-file --gpuc-data-parallel=shard-ranks=3 --gpuc-optimizer=kind=adam | FileCheck %s --check-prefix=SHOPT
// RUN: gpuc-opt %s --split-input-file --gpuc-accumulate-gradients=steps=2 --gpuc-data-parallel | FileCheck %s --check-prefix=ACC
// RUN: gpuc-opt %s --split-input-file --gpuc-accumulate-gradients=steps=2 --gpuc-data-parallel=shard-ranks=2 --gpuc-optimizer=kind=sgd | FileCheck %s --check-prefix=SHACC

// Backward computes @b's gradient (40 bytes) before @w's (160 bytes): with
// the default 25 MiB both share one bucket, placed after the last of them;
// with 32-byte buckets each gets its own, right after it is computed. The
// mean over the ranks scales each summed gradient.

gpuc.parameter @w trainable : tensor<10x4xf32> = dense<1.0> : tensor<10x4xf32>
gpuc.parameter @b trainable : tensor<10xf32> = dense<0.0> : tensor<10xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[R:[a-z0-9]+]]: tensor<f32> {gpuc.default = 1.000000e+00 : f64, gpuc.hyper = "ranks_reciprocal"}
// CHECK-SAME: gpuc.data_parallel = {bucket_bytes = 26214400 : i64, buckets = 1 : i64, gradient_bytes = 200 : i64}
// CHECK: %[[DB:.+]] = gpuc.reduce_sum
// CHECK: %[[DW:.+]] = gpuc.matmul
// CHECK-NEXT: %[[G:.+]]:2 = gpuc.all_reduce %[[DB]], %[[DW]] bucket = 0 : tensor<10xf32>, tensor<10x4xf32>
// CHECK: %[[RB:.+]] = gpuc.broadcast %[[R]] : tensor<f32> -> tensor<10xf32>
// CHECK: %[[MB:.+]] = gpuc.mul %[[G]]#0, %[[RB]]
// CHECK: %[[RW:.+]] = gpuc.broadcast %[[R]] : tensor<f32> -> tensor<10x4xf32>
// CHECK: %[[MW:.+]] = gpuc.mul %[[G]]#1, %[[RW]]
// CHECK: return %{{.+}}, %[[MW]], %[[MB]]

// SMALL-LABEL: func.func @train_step
// SMALL-SAME: buckets = 2 : i64
// SMALL: %[[DB:.+]] = gpuc.reduce_sum
// SMALL-NEXT: gpuc.all_reduce %[[DB]] bucket = 0 : tensor<10xf32>
// SMALL: %[[DW:.+]] = gpuc.matmul
// SMALL-NEXT: gpuc.all_reduce %[[DW]] bucket = 1 : tensor<10x4xf32>

// Sharded over 3 ranks, each bucket is a reduce-scatter: the gradient
// results become this rank's shards of the mean, ceil(n / 3) elements.
// SHARD-LABEL: func.func @train_step
// SHARD-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<14xf32> {gpuc.grad = @w}, tensor<4xf32> {gpuc.grad = @b})
// SHARD-SAME: shard_ranks = 3 : i64
// SHARD: %[[DB:.+]] = gpuc.reduce_sum
// SHARD: %[[DW:.+]] = gpuc.matmul
// SHARD-NEXT: %[[S:.+]]:2 = gpuc.reduce_scatter %[[DB]], %[[DW]] bucket = 0 ranks = 3 : (tensor<10xf32>, tensor<10x4xf32>) -> (tensor<4xf32>, tensor<14xf32>)
// SHARD: gpuc.mul %[[S]]#0
// SHARD: gpuc.mul %[[S]]#1

// The optimizer keeps this rank's shard of the moments (whole in
// checkpoints: gpuc.shard_of), updates this rank's shard of each parameter
// and gathers the updated shards whole.
// SHOPT: gpuc.parameter @w.exp_avg : tensor<14xf32> = dense<0.000000e+00> : tensor<14xf32> {gpuc.optimizer_state, gpuc.shard_of = array<i64: 10, 4>}
// SHOPT: gpuc.parameter @b.exp_avg_sq : tensor<4xf32> = dense<0.000000e+00> : tensor<4xf32> {gpuc.optimizer_state, gpuc.shard_of = array<i64: 10>}
// SHOPT-LABEL: func.func @train_step
// SHOPT-SAME: %[[W:[a-z0-9]+]]: tensor<10x4xf32> {gpuc.param = @w}, %[[B:[a-z0-9]+]]: tensor<10xf32> {gpuc.param = @b}
// SHOPT-SAME: -> (tensor<f32> {gpuc.output = "loss"}, tensor<10x4xf32> {gpuc.update = @w}, tensor<14xf32> {gpuc.update = @w.exp_avg}, tensor<14xf32> {gpuc.update = @w.exp_avg_sq}, tensor<10xf32> {gpuc.update = @b}
// SHOPT: gpuc.reduce_scatter
// SHOPT: %[[PW:.+]] = gpuc.rank_shard %[[W]] ranks = 3 : tensor<10x4xf32> -> tensor<14xf32>
// SHOPT: gpuc.mul %{{.+}}, %[[PW]] : tensor<14xf32>
// SHOPT: %[[PB:.+]] = gpuc.rank_shard %[[B]] ranks = 3 : tensor<10xf32> -> tensor<4xf32>
// SHOPT: gpuc.mul %{{.+}}, %[[PB]] : tensor<4xf32>
// SHOPT: %[[G:.+]]:2 = gpuc.all_gather %{{.+}}, %{{.+}} bucket = 1 ranks = 3 : (tensor<14xf32>, tensor<4xf32>) -> (tensor<10x4xf32>, tensor<10xf32>)
// SHOPT: return %{{.+}}, %[[G]]#0, %{{.+}}, %{{.+}}, %[[G]]#1,

// The optimizer reads the mean gradient.
// OPT-LABEL: func.func @train_step
// OPT: gpuc.all_reduce
// OPT: %[[MW:.+]] = gpuc.mul %{{.+}}#1
// OPT: gpuc.add %[[MW]], %{{.+}} : tensor<10x4xf32>
func.func @train_step(%w: tensor<10x4xf32> {gpuc.param = @w}, %b: tensor<10xf32> {gpuc.param = @b}, %x: tensor<8x4xf32> {gpuc.input = "x"}, %dy: tensor<8x10xf32> {gpuc.input = "dy"}, %l: tensor<f32> {gpuc.input = "l"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<10x4xf32> {gpuc.grad = @w}, tensor<10xf32> {gpuc.grad = @b}) {
  %db = gpuc.reduce_sum %dy axes = [0] : tensor<8x10xf32> -> tensor<10xf32>
  %dw = gpuc.matmul %dy, %x transpose_lhs : (tensor<8x10xf32>, tensor<8x4xf32>) -> tensor<10x4xf32>
  return %l, %dw, %db : tensor<f32>, tensor<10x4xf32>, tensor<10xf32>
}

// -----

// A constant gradient is the same on every rank: nothing to sum. A value
// that is the gradient of two parameters is summed once.
gpuc.parameter @u trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
gpuc.parameter @v trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
gpuc.parameter @z trainable : tensor<3xf32> = dense<1.0> : tensor<3xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: gradient_bytes = 12 : i64
// CHECK: %[[ZERO:.+]] = gpuc.constant
// CHECK: %[[G:.+]] = gpuc.all_reduce %{{.+}} bucket = 0 : tensor<3xf32>
// CHECK: %[[M:.+]] = gpuc.mul %[[G]]
// CHECK: return %{{.+}}, %[[M]], %[[M]], %[[ZERO]]
func.func @train_step(%u: tensor<3xf32> {gpuc.param = @u}, %v: tensor<3xf32> {gpuc.param = @v}, %z: tensor<3xf32> {gpuc.param = @z}, %g: tensor<3xf32> {gpuc.input = "g"}, %l: tensor<f32> {gpuc.input = "l"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<3xf32> {gpuc.grad = @u}, tensor<3xf32> {gpuc.grad = @v}, tensor<3xf32> {gpuc.grad = @z}) {
  %zero = gpuc.constant dense<0.0> : tensor<3xf32>
  %d = gpuc.relu %g : tensor<3xf32>
  return %l, %d, %d, %zero : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// With gradient accumulation the ranks sum the accumulated gradients once
// per update, in @apply_update; the step only accumulates.
// ACC: gpuc.parameter @amp.loss_scale
// ACC: func.func @train_step
// ACC-NOT: gpuc.all_reduce
// ACC: func.func @apply_update
// ACC-SAME: gpuc.data_parallel = {bucket_bytes = 26214400 : i64, buckets = 1 : i64, gradient_bytes = 20 : i64}
// ACC: %[[MEAN:.+]] = gpuc.mul %{{.+}}, %{{.+}} : tensor<5xf32>
// ACC-NEXT: gpuc.all_reduce %[[MEAN]] bucket = 0 : tensor<5xf32>

// Sharded, with a loss scale: the update reduce-scatters the mean, checks
// that every rank's shards are finite through an all-reduce of the check,
// and gathers the parameter.
// SHACC: gpuc.parameter @amp.loss_scale
// SHACC: func.func @train_step
// SHACC-NOT: gpuc.reduce_scatter
// SHACC: func.func @apply_update
// SHACC: gpuc.reduce_scatter %{{.+}} bucket = 0 ranks = 2 : (tensor<5xf32>) -> (tensor<3xf32>)
// SHACC: %[[FINITE:.+]] = gpuc.all_reduce %{{.+}} bucket = 1 : tensor<f32>
// SHACC: gpuc.compare eq, %[[FINITE]]
// SHACC: gpuc.rank_shard %{{.+}} ranks = 2 : tensor<5xf32> -> tensor<3xf32>
// SHACC: gpuc.all_gather %{{.+}} bucket = 2 ranks = 2 : (tensor<3xf32>) -> (tensor<5xf32>)
gpuc.parameter @w trainable : tensor<5xf32> = dense<1.0> : tensor<5xf32>
gpuc.parameter @amp.loss_scale : tensor<f32> = dense<65536.0> : tensor<f32> {gpuc.loss_scale = {mode = "dynamic", growth_interval = 2000 : i64}}
func.func @train_step(%w: tensor<5xf32> {gpuc.param = @w}, %g: tensor<5xf32> {gpuc.input = "g"}, %l: tensor<f32> {gpuc.input = "l"}) -> (tensor<f32> {gpuc.output = "loss"}, tensor<5xf32> {gpuc.grad = @w}) {
  %d = gpuc.relu %g : tensor<5xf32>
  return %l, %d : tensor<f32>, tensor<5xf32>
}
