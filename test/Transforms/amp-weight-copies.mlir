// RUN: gpuc-opt %s -split-input-file --gpuc-amp-weight-copies | FileCheck %s

// The f16 cast of @w becomes the persistent copy @w.f16 (its initial value
// rounded), read by @train_step and @eval; the update of @w also writes the
// copy. @b, read in f32 only, gets none.

// CHECK: gpuc.parameter @w trainable : tensor<2x2xf32>
// CHECK-NEXT: gpuc.parameter @w.f16 : tensor<2x2xf16> = dense<{{\[\[}}1.000000e+00, 3.332520e-01], [6.550400e+04, 0.000000e+00]]> : tensor<2x2xf16> {gpuc.optimizer_state}
// CHECK-NOT: @b.f16
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<2x2xf32> {gpuc.param = @w}
// CHECK-SAME: %[[COPY:[a-z0-9]+]]: tensor<2x2xf16> {gpuc.param = @w.f16})
// CHECK-SAME: tensor<2x2xf16> {gpuc.update = @w.f16})
// CHECK-NOT: gpuc.cast %[[W]]
// CHECK: gpuc.matmul %{{.+}}, %[[COPY]]
// CHECK: %[[NEW:.+]] = gpuc.sub %[[W]]
// CHECK: %[[NEWCOPY:.+]] = gpuc.cast %[[NEW]] : tensor<2x2xf32> to tensor<2x2xf16>
// CHECK: return %{{.+}}, %[[NEW]], %{{.+}}, %[[NEWCOPY]]
// CHECK-LABEL: func.func @eval
// CHECK-SAME: %[[ECOPY:[a-z0-9]+]]: tensor<2x2xf16> {gpuc.param = @w.f16})
// CHECK: gpuc.matmul %{{.+}}, %[[ECOPY]]
gpuc.parameter @w trainable : tensor<2x2xf32> = dense<[[1.0, 0.33333333], [65504.0, 0.0]]> : tensor<2x2xf32>
gpuc.parameter @b trainable : tensor<2xf32> = dense<0.0> : tensor<2xf32>
func.func @train_step(%x: tensor<2x2xf16> {gpuc.input = "x"}, %w: tensor<2x2xf32> {gpuc.param = @w}, %b: tensor<2xf32> {gpuc.param = @b}) -> (tensor<2x2xf16> {gpuc.output = "y"}, tensor<2x2xf32> {gpuc.update = @w}, tensor<2xf32> {gpuc.update = @b}) {
  %wl = gpuc.cast %w : tensor<2x2xf32> to tensor<2x2xf16>
  %y = gpuc.matmul %x, %wl : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16>
  %one = gpuc.constant dense<1.0> : tensor<2x2xf32>
  %nw = gpuc.sub %w, %one : tensor<2x2xf32>
  %nb = gpuc.add %b, %b : tensor<2xf32>
  return %y, %nw, %nb : tensor<2x2xf16>, tensor<2x2xf32>, tensor<2xf32>
}
func.func @eval(%x: tensor<2x2xf16> {gpuc.input = "x"}, %w: tensor<2x2xf32> {gpuc.param = @w}) -> (tensor<2x2xf16> {gpuc.output = "y"}) {
  %wl = gpuc.cast %w : tensor<2x2xf32> to tensor<2x2xf16>
  %y = gpuc.matmul %x, %wl : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16>
  return %y : tensor<2x2xf16>
}


// -----

// A copy only @eval reads (a bias its GEMM adds as an epilogue, where the
// step adds it in f32): the step, which writes the copy, takes it as an
// argument too, so that its update is written in place.
// CHECK: gpuc.parameter @b.bf16 : tensor<2xbf16>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<2xbf16> {gpuc.param = @b.bf16})
// CHECK-SAME: tensor<2xbf16> {gpuc.update = @b.bf16})
// CHECK-LABEL: func.func @eval
// CHECK-SAME: %[[C:[a-z0-9]+]]: tensor<2xbf16> {gpuc.param = @b.bf16})
// CHECK: gpuc.matmul %arg0, %arg0 bias %[[C]]
gpuc.parameter @b trainable : tensor<2xf32> = dense<0.5> : tensor<2xf32>
func.func @train_step(%x: tensor<2x2xbf16> {gpuc.input = "x"}, %b: tensor<2xf32> {gpuc.param = @b}) -> (tensor<2x2xf32> {gpuc.output = "y"}, tensor<2xf32> {gpuc.update = @b}) {
  %p = gpuc.matmul %x, %x : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16>
  %w = gpuc.cast %p : tensor<2x2xbf16> to tensor<2x2xf32>
  %bb = gpuc.broadcast %b : tensor<2xf32> -> tensor<2x2xf32>
  %y = gpuc.add %w, %bb : tensor<2x2xf32>
  %nb = gpuc.add %b, %b : tensor<2xf32>
  return %y, %nb : tensor<2x2xf32>, tensor<2xf32>
}
func.func @eval(%x: tensor<2x2xbf16> {gpuc.input = "x"}, %b: tensor<2xf32> {gpuc.param = @b}) -> (tensor<2x2xbf16> {gpuc.output = "y"}) {
  %bl = gpuc.cast %b : tensor<2xf32> to tensor<2xbf16>
  %y = gpuc.matmul %x, %x bias %bl : tensor<2xbf16> : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// -----

// A --dump-dir file's elided weight (a type without values): its copy is
// elided too, so that the passes after this one can run on the dump.
// CHECK: gpuc.parameter @w.bf16 : tensor<2x2xbf16> = dense_resource<__elided__> : tensor<2x2xbf16> {gpuc.optimizer_state}
// CHECK-LABEL: func.func @train_step
// CHECK: gpuc.matmul %{{.+}}, %{{.+}} : (tensor<2x2xbf16>, tensor<2x2xbf16>)
gpuc.parameter @w trainable : tensor<2x2xf32> = dense_resource<__elided__> : tensor<2x2xf32>
func.func @train_step(%x: tensor<2x2xbf16> {gpuc.input = "x"}, %w: tensor<2x2xf32> {gpuc.param = @w}) -> (tensor<2x2xbf16> {gpuc.output = "y"}, tensor<2x2xf32> {gpuc.update = @w}) {
  %wl = gpuc.cast %w : tensor<2x2xf32> to tensor<2x2xbf16>
  %y = gpuc.matmul %x, %wl : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16>
  %nw = gpuc.add %w, %w : tensor<2x2xf32>
  return %y, %nw : tensor<2x2xbf16>, tensor<2x2xf32>
}
