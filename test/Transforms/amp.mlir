// RUN: gpuc-opt %s -split-input-file --gpuc-amp="precision=fp16" | FileCheck %s --check-prefix=FP16
// RUN: gpuc-opt %s -split-input-file --gpuc-amp="precision=bf16" | FileCheck %s --check-prefix=BF16
// RUN: gpuc-opt %s -split-input-file --gpuc-amp="precision=fp16 loss-scale=static loss-scale-init=1024" | FileCheck %s --check-prefix=STATIC
// RUN: gpuc-opt %s -split-input-file --gpuc-amp="precision=fp32" | FileCheck %s --check-prefix=FP32
// RUN: gpuc-opt %s -split-input-file --gpuc-amp="precision=bf16 low-head=true" | FileCheck %s --check-prefix=HEAD
// RUN: not gpuc-opt %s -split-input-file --gpuc-amp="precision=fp8" 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not gpuc-opt %s -split-input-file --gpuc-amp="precision=fp16 loss-scale=sometimes" 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: not gpuc-opt %s -split-input-file --gpuc-amp="precision=fp16 loss-scale-init=0" 2>&1 | FileCheck %s --check-prefix=BADINIT

// BADTYPE: error: unknown precision 'fp8'; the precisions are fp32, fp16 and bf16
// BADMODE: error: unknown loss scaling 'sometimes'; use dynamic, static or none
// BADINIT: error: the initial loss scale must be a positive finite number, not 0

// The policy on a small classifier: the GEMM reads and writes f16 (its
// weight is cast where it is read, the master stays f32; its input x, read
// only there, is itself stored in f16); relu, exact under rounding, runs in
// f16 on the GEMM's f16 result (so backward keeps its f16 result); the
// transpose moves f16; the reduction, the loss and the declared results
// stay f32.

// FP16: gpuc.parameter @amp.loss_scale : tensor<f32> = dense<6.553600e+04> : tensor<f32> {gpuc.loss_scale = {growth_interval = 2000 : i64, mode = "dynamic"}, gpuc.optimizer_state}
// FP16: gpuc.parameter @amp.good_steps : tensor<f32> = dense<0.000000e+00>
// FP16: gpuc.parameter @amp.skipped_steps : tensor<f32> = dense<0.000000e+00>
// FP16-LABEL: func.func @forward
// FP16-SAME: %[[X:[a-z0-9]+]]: tensor<2x4xf16> {gpuc.input = "x"}
// FP16-SAME: %[[W:[a-z0-9]+]]: tensor<4x3xf32> {gpuc.param = @w}
// FP16-SAME: attributes {gpuc.precision = "fp16"}
// FP16: %[[WL:.+]] = gpuc.cast %[[W]] : tensor<4x3xf32> to tensor<4x3xf16>
// FP16: %[[H:.+]] = gpuc.matmul %[[X]], %[[WL]] : (tensor<2x4xf16>, tensor<4x3xf16>) -> tensor<2x3xf16>
// FP16: %[[RL:.+]] = gpuc.relu %[[H]] : tensor<2x3xf16>
// One widening of the stored value serves every f32 reader.
// FP16: %[[RW:.+]] = gpuc.cast %[[RL]] : tensor<2x3xf16> to tensor<2x3xf32>
// FP16: %[[T:.+]] = gpuc.transpose %[[RL]] perm = [1, 0] : tensor<2x3xf16> -> tensor<3x2xf16>
// FP16: %[[TW:.+]] = gpuc.cast %[[T]] : tensor<3x2xf16> to tensor<3x2xf32>
// FP16: %[[S:.+]] = gpuc.reduce_sum %[[RW]] axes = [1] : tensor<2x3xf32> -> tensor<2xf32>
// FP16: %[[LOSS:.+]] = gpuc.cross_entropy %[[RW]], %{{.+}} reduction = mean : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
// The results keep their declared types.
// FP16: return %[[RW]], %[[TW]], %[[S]], %[[LOSS]]

// bf16 has no loss scaling by default.
// BF16-NOT: amp.loss_scale
// BF16-LABEL: func.func @forward
// BF16: gpuc.matmul %{{.+}}, %{{.+}} : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>

// STATIC: gpuc.parameter @amp.loss_scale : tensor<f32> = dense<1.024000e+03> : tensor<f32> {gpuc.loss_scale = {growth_interval = 2000 : i64, mode = "static"}, gpuc.optimizer_state}

// FP32-NOT: gpuc.cast
// FP32-NOT: f16
gpuc.parameter @w trainable : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
func.func @forward(%x: tensor<2x4xf32> {gpuc.input = "x"}, %w: tensor<4x3xf32> {gpuc.param = @w}, %y: tensor<2xi64> {gpuc.input = "label"}) -> (tensor<2x3xf32> {gpuc.output = "h"}, tensor<3x2xf32> {gpuc.output = "t"}, tensor<2xf32> {gpuc.output = "s"}, tensor<f32> {gpuc.output = "loss"}) {
  %h = gpuc.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %r = gpuc.relu %h : tensor<2x3xf32>
  %t = gpuc.transpose %r perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %s = gpuc.reduce_sum %r axes = [1] : tensor<2x3xf32> -> tensor<2xf32>
  %l = gpuc.cross_entropy %r, %y reduction = mean : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %r, %t, %s, %l : tensor<2x3xf32>, tensor<3x2xf32>, tensor<2xf32>, tensor<f32>
}

// -----

// Mixed operands of a data-movement op meet in the low type; @eval gets
// the same policy as @forward. Without a @forward (nothing to train) there
// is no loss-scale state. Both inputs are read only in f16, so both are
// stored in f16.

// FP16-NOT: amp.loss_scale
// FP16-LABEL: func.func @eval
// FP16-SAME: (%{{.+}}: tensor<2x4xf16> {gpuc.input = "x"}, %[[B:[a-z0-9]+]]: tensor<2x3xf16> {gpuc.input = "b"}
// FP16: %[[A:.+]] = gpuc.matmul
// FP16: gpuc.concat %[[A]], %[[B]] axis = 0 : (tensor<2x3xf16>, tensor<2x3xf16>) -> tensor<4x3xf16>
gpuc.parameter @w trainable : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
func.func @eval(%x: tensor<2x4xf32> {gpuc.input = "x"}, %b: tensor<2x3xf32> {gpuc.input = "b"}, %w: tensor<4x3xf32> {gpuc.param = @w}) -> (tensor<4x3xf32> {gpuc.output = "c"}) {
  %h = gpuc.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %c = gpuc.concat %h, %b axis = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %c : tensor<4x3xf32>
}

// -----

// An input read in f32 anywhere (here by the f32 add, before @eval's GEMM)
// stays f32 in every function: they share its buffer.
// FP16-LABEL: func.func @forward
// FP16-SAME: %[[X:[a-z0-9]+]]: tensor<2x4xf32> {gpuc.input = "x"}
// FP16: gpuc.cast %[[X]] : tensor<2x4xf32> to tensor<2x4xf16>
// FP16-LABEL: func.func @eval
// FP16-SAME: %{{[a-z0-9]+}}: tensor<2x4xf32> {gpuc.input = "x"}
gpuc.parameter @w trainable : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
func.func @forward(%x: tensor<2x4xf32> {gpuc.input = "x"}, %w: tensor<4x3xf32> {gpuc.param = @w}) -> (tensor<2x3xf32> {gpuc.output = "h"}) {
  %h = gpuc.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %h : tensor<2x3xf32>
}
func.func @eval(%x: tensor<2x4xf32> {gpuc.input = "x"}, %w: tensor<4x3xf32> {gpuc.param = @w}) -> (tensor<2x3xf32> {gpuc.output = "h"}) {
  %e = gpuc.exp %x : tensor<2x4xf32>
  %h = gpuc.matmul %e, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %h : tensor<2x3xf32>
}

// -----

// A language model's head computes in f32 from its widened operands; with
// low-head it reads them in bf16, as a GEMM would, and its loss stays f32.
// BF16-LABEL: func.func @forward
// BF16: %[[HW:.+]] = gpuc.cast %{{.+}} : tensor<6x4xbf16> to tensor<6x4xf32>
// BF16: gpuc.linear_cross_entropy %[[HW]], %arg1, %arg2 reduction = mean : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<f32>
// HEAD-LABEL: func.func @forward
// HEAD: %[[W:.+]] = gpuc.cast %arg1 : tensor<9x4xf32> to tensor<9x4xbf16>
// HEAD: %[[H:.+]] = gpuc.matmul {{.*}} -> tensor<6x4xbf16>
// HEAD: %[[L:.+]] = gpuc.linear_cross_entropy %[[H]], %[[W]], %arg2 reduction = mean : (tensor<6x4xbf16>, tensor<9x4xbf16>, tensor<6xi64>) -> tensor<f32>
// HEAD: return %[[L]]
gpuc.parameter @p trainable : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
gpuc.parameter @w trainable : tensor<9x4xf32> = dense<0.5> : tensor<9x4xf32>
func.func @forward(%x: tensor<6x4xf32> {gpuc.input = "x"}, %w: tensor<9x4xf32> {gpuc.param = @w}, %y: tensor<6xi64> {gpuc.input = "label"}, %p: tensor<4x4xf32> {gpuc.param = @p}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %h = gpuc.matmul %x, %p : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = gpuc.linear_cross_entropy %h, %w, %y reduction = mean : (tensor<6x4xf32>, tensor<9x4xf32>, tensor<6xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
