// RUN: gpuc-opt %s --gpuc-form-kernels -split-input-file | FileCheck %s

// Every computing op becomes a one-op gpuc.fusion; library calls and
// reshapes stay outside; splat constants and broadcasts read by a pointwise
// op are cloned into its kernel (the broadcast's input is what it reads).

// CHECK-LABEL: func.func @bias_relu
// CHECK: %[[MM:.+]] = gpuc.matmul %arg0, %arg1
// CHECK: %[[BIAS:.+]] = gpuc.fusion(%[[MM]], %arg2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8xf32>):
// CHECK-NEXT: %[[BB:.+]] = gpuc.broadcast %[[B]] : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.+]] = gpuc.add %[[A]], %[[BB]]
// CHECK-NEXT: gpuc.yield %[[S]]
// CHECK-NOT: gpuc.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: %[[RELU:.+]] = gpuc.fusion(%[[BIAS]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK: gpuc.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: gpuc.max
// CHECK: %[[FLAT:.+]] = gpuc.reshape %[[RELU]]
// CHECK: %[[SUM:.+]] = gpuc.fusion(%[[FLAT]]) : (tensor<32xf32>) -> tensor<f32> {
// CHECK: gpuc.reduce_sum
// CHECK: return %[[SUM]]
func.func @bias_relu(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<f32> {
  %m = gpuc.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %s = gpuc.add %m, %bb : tensor<4x8xf32>
  %zero = gpuc.constant dense<0.0> : tensor<4x8xf32>
  %r = gpuc.max %s, %zero : tensor<4x8xf32>
  %flat = gpuc.reshape %r : tensor<4x8xf32> -> tensor<32xf32>
  %t = gpuc.reduce_sum %flat axes = [0] : tensor<32xf32> -> tensor<f32>
  return %t : tensor<f32>
}

// -----

// A broadcast read by a library call (or returned) is materialized by its
// own kernel; one read by nobody once its readers recompute it disappears.
// CHECK-LABEL: func.func @materialized
// CHECK: %[[B:.+]] = gpuc.fusion(%arg1) : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: gpuc.broadcast
// CHECK: gpuc.matmul %arg0, %[[B]] transpose_rhs
func.func @materialized(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x4xf32> {
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %m = gpuc.matmul %a, %bb transpose_rhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

// Ops already grouped by a fusion stay as they are.
// CHECK-LABEL: func.func @already_fused
// CHECK: gpuc.fusion(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.exp
// CHECK-NEXT: gpuc.neg
// CHECK-NEXT: gpuc.yield
// CHECK-NOT: gpuc.fusion
func.func @already_fused(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = gpuc.fusion(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = gpuc.exp %a : tensor<4xf32>
    %n = gpuc.neg %e : tensor<4xf32>
    gpuc.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// A widening cast (mixed precision) is recomputed by each kernel that reads
// it: the kernels read the f16 value, and no kernel writes an f32 copy.
// CHECK-LABEL: func.func @widening
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16>)
// CHECK-NOT: -> tensor<4xf32> {
// CHECK: gpuc.fusion(%[[X]]) : (tensor<4xf16>) -> tensor<4xf32>
// CHECK: gpuc.cast
// CHECK: gpuc.relu
// CHECK: gpuc.fusion(%[[X]]) : (tensor<4xf16>) -> tensor<f32>
// CHECK: gpuc.cast
// CHECK: gpuc.reduce_sum
func.func @widening(%x: tensor<4xf16>) -> (tensor<4xf32>, tensor<f32>) {
  %w = gpuc.cast %x : tensor<4xf16> to tensor<4xf32>
  %r = gpuc.relu %w : tensor<4xf32>
  %s = gpuc.reduce_sum %w axes = [0] : tensor<4xf32> -> tensor<f32>
  return %r, %s : tensor<4xf32>, tensor<f32>
}

// -----

// A fused projection's query, key and value are row windows of one stored
// tensor: the fused attention kernels (forward and gradient) read them in
// place, the slices and reshapes cloned into each kernel, and no kernel
// copies them out. A window read by anything else keeps its own kernel.
// CHECK-LABEL: func.func @qkv_windows
// CHECK: %[[QKV:.+]] = gpuc.matmul
// CHECK-NEXT: %[[R:.+]] = gpuc.reshape %[[QKV]] : tensor<12x24xbf16> -> tensor<2x6x24xbf16>
// CHECK-NEXT: %[[V3:.+]] = gpuc.fusion(%[[R]]) : (tensor<2x6x24xbf16>) -> tensor<2x6x8xbf16>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpuc.slice %{{.+}} starts = [0, 0, 16]
// CHECK: %[[F:.+]]:2 = gpuc.fusion(%[[R]]) : (tensor<2x6x24xbf16>) -> (tensor<2x6x2x4xbf16>, tensor<2x2x6xf32>) {
// CHECK: gpuc.slice %{{.+}} starts = [0, 0, 8] limits = [2, 6, 16]
// CHECK: gpuc.attention
// CHECK: %[[G:.+]]:3 = gpuc.fusion(%[[R]], %[[F]]#0, %[[F]]#1, %arg2) : (tensor<2x6x24xbf16>,
// CHECK: gpuc.attention_grad
// CHECK: return %[[F]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[V3]]
func.func @qkv_windows(%x: tensor<12x8xbf16>, %w: tensor<8x24xbf16>, %do: tensor<2x6x2x4xbf16>) -> (tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x8xbf16>) {
  %p = gpuc.matmul %x, %w : (tensor<12x8xbf16>, tensor<8x24xbf16>) -> tensor<12x24xbf16>
  %qkv = gpuc.reshape %p : tensor<12x24xbf16> -> tensor<2x6x24xbf16>
  %q3 = gpuc.slice %qkv starts = [0, 0, 0] limits = [2, 6, 8] strides = [1, 1, 1] : tensor<2x6x24xbf16> -> tensor<2x6x8xbf16>
  %k3 = gpuc.slice %qkv starts = [0, 0, 8] limits = [2, 6, 16] strides = [1, 1, 1] : tensor<2x6x24xbf16> -> tensor<2x6x8xbf16>
  %v3 = gpuc.slice %qkv starts = [0, 0, 16] limits = [2, 6, 24] strides = [1, 1, 1] : tensor<2x6x24xbf16> -> tensor<2x6x8xbf16>
  %q = gpuc.reshape %q3 : tensor<2x6x8xbf16> -> tensor<2x6x2x4xbf16>
  %k = gpuc.reshape %k3 : tensor<2x6x8xbf16> -> tensor<2x6x2x4xbf16>
  %v = gpuc.reshape %v3 : tensor<2x6x8xbf16> -> tensor<2x6x2x4xbf16>
  %o, %lse = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16> -> tensor<2x6x2x4xbf16>, tensor<2x2x6xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x2x6xf32>
  return %o, %dq, %dk, %dv, %v3 : tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x2x4xbf16>, tensor<2x6x8xbf16>
}

// -----

// One window that is both the query and the key: cut once, read twice, and
// its slice gone.
// CHECK-LABEL: func.func @shared_window
// CHECK: %[[F:.+]]:2 = gpuc.fusion(%arg0) : (tensor<2x6x16xf32>)
// CHECK: gpuc.attention %[[W:.+]], %[[W]], %{{.+}} scale
// CHECK-NOT: gpuc.slice
// CHECK: return %[[F]]#0
func.func @shared_window(%qkv: tensor<2x6x16xf32>) -> tensor<2x6x2x4xf32> {
  %x3 = gpuc.slice %qkv starts = [0, 0, 0] limits = [2, 6, 8] strides = [1, 1, 1] : tensor<2x6x16xf32> -> tensor<2x6x8xf32>
  %v3 = gpuc.slice %qkv starts = [0, 0, 8] limits = [2, 6, 16] strides = [1, 1, 1] : tensor<2x6x16xf32> -> tensor<2x6x8xf32>
  %x = gpuc.reshape %x3 : tensor<2x6x8xf32> -> tensor<2x6x2x4xf32>
  %v = gpuc.reshape %v3 : tensor<2x6x8xf32> -> tensor<2x6x2x4xf32>
  %o, %lse = gpuc.attention %x, %x, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<2x6x2x4xf32>, tensor<2x6x2x4xf32>, tensor<2x6x2x4xf32> -> tensor<2x6x2x4xf32>, tensor<2x2x6xf32>
  return %o : tensor<2x6x2x4xf32>
}

// -----

// The gradients of a fused projection's query, key and value, merged from
// heads and joined again along the rows: the backward kernel stores each
// as a row window of the concat, which it yields, and no kernel joins them.
// CHECK-LABEL: func.func @gradients_joined
// CHECK: %[[G:.+]] = gpuc.fusion(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) : ({{.+}}) -> tensor<2x6x24xf32>
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = gpuc.attention_grad
// CHECK: %[[Q:.+]] = gpuc.reshape %[[DQ]] : tensor<2x6x2x4xf32> -> tensor<2x6x8xf32>
// CHECK: %[[K:.+]] = gpuc.reshape %[[DK]]
// CHECK: %[[V:.+]] = gpuc.reshape %[[DV]]
// CHECK: %[[J:.+]] = gpuc.concat %[[Q]], %[[K]], %[[V]] axis = 2
// CHECK: gpuc.yield %[[J]] : tensor<2x6x24xf32>
// CHECK-NOT: gpuc.concat
// CHECK: return %[[G]]
func.func @gradients_joined(%q: tensor<2x6x2x4xf32>, %k: tensor<2x6x2x4xf32>, %v: tensor<2x6x2x4xf32>, %o: tensor<2x6x2x4xf32>, %lse: tensor<2x2x6xf32>, %do: tensor<2x6x2x4xf32>) -> tensor<2x6x24xf32> {
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<2x6x2x4xf32>, tensor<2x6x2x4xf32>, tensor<2x6x2x4xf32>, tensor<2x6x2x4xf32>, tensor<2x2x6xf32>
  %dq3 = gpuc.reshape %dq : tensor<2x6x2x4xf32> -> tensor<2x6x8xf32>
  %dk3 = gpuc.reshape %dk : tensor<2x6x2x4xf32> -> tensor<2x6x8xf32>
  %dv3 = gpuc.reshape %dv : tensor<2x6x2x4xf32> -> tensor<2x6x8xf32>
  %g = gpuc.concat %dq3, %dk3, %dv3 axis = 2 : (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x6x24xf32>
  return %g : tensor<2x6x24xf32>
}

// -----

// nn.MultiheadAttention's heads, [1, T, B*H, D] rows reshaped to [T, B, C]:
// no row merge, so the gradients stay the kernel's results and the concat
// its own kernel. So does a gradient read by anything besides the concat.
// CHECK-LABEL: func.func @gradients_not_joined
// CHECK: %[[G:.+]]:3 = gpuc.fusion
// CHECK: gpuc.attention_grad
// CHECK: gpuc.yield
// CHECK: gpuc.fusion
// CHECK: gpuc.concat
// CHECK: %[[H:.+]]:3 = gpuc.fusion
// CHECK: gpuc.attention_grad
// CHECK: gpuc.yield
// CHECK: gpuc.fusion
// CHECK: gpuc.concat
func.func @gradients_not_joined(%q: tensor<1x6x4x4xf32>, %k: tensor<1x6x4x4xf32>, %v: tensor<1x6x4x4xf32>, %o: tensor<1x6x4x4xf32>, %lse: tensor<1x4x6xf32>, %do: tensor<1x6x4x4xf32>) -> (tensor<6x2x24xf32>, tensor<1x6x48xf32>, tensor<1x6x4x4xf32>) {
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x4x6xf32>
  %dq3 = gpuc.reshape %dq : tensor<1x6x4x4xf32> -> tensor<6x2x8xf32>
  %dk3 = gpuc.reshape %dk : tensor<1x6x4x4xf32> -> tensor<6x2x8xf32>
  %dv3 = gpuc.reshape %dv : tensor<1x6x4x4xf32> -> tensor<6x2x8xf32>
  %g = gpuc.concat %dq3, %dk3, %dv3 axis = 2 : (tensor<6x2x8xf32>, tensor<6x2x8xf32>, tensor<6x2x8xf32>) -> tensor<6x2x24xf32>
  %eq, %ek, %ev = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x4x6xf32>
  %eq3 = gpuc.reshape %eq : tensor<1x6x4x4xf32> -> tensor<1x6x16xf32>
  %ek3 = gpuc.reshape %ek : tensor<1x6x4x4xf32> -> tensor<1x6x16xf32>
  %ev3 = gpuc.reshape %ev : tensor<1x6x4x4xf32> -> tensor<1x6x16xf32>
  %h = gpuc.concat %eq3, %ek3, %ev3 axis = 2 : (tensor<1x6x16xf32>, tensor<1x6x16xf32>, tensor<1x6x16xf32>) -> tensor<1x6x48xf32>
  return %g, %h, %eq : tensor<6x2x24xf32>, tensor<1x6x48xf32>, tensor<1x6x4x4xf32>
}
