// RUN: gpuc-opt %s --gpuc-fold-layouts -split-input-file | FileCheck %s

// Attention's head split and merge: the matmuls read [B, T, H, D] as
// [B, H, T, D] and write their product back as [B, T, H, D].
// CHECK-LABEL: func.func @head_split_and_merge
// CHECK-NOT: gpuc.transpose
// CHECK: %[[S:.+]] = gpuc.matmul %arg0, %arg1 transpose_rhs lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x3x5x5xf32>
// CHECK: %[[Y:.+]] = gpuc.matmul %[[S]], %arg2 rhs_perm = [0, 2, 1, 3] result_perm = [0, 2, 1, 3] : (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK: return %[[Y]]
func.func @head_split_and_merge(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32> {
  %qh = gpuc.transpose %q perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = gpuc.transpose %k perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %vh = gpuc.transpose %v perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %s = gpuc.matmul %qh, %kh transpose_rhs : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %y = gpuc.matmul %s, %vh : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %o = gpuc.transpose %y perm = [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  return %o : tensor<2x5x3x4xf32>
}

// -----

// A transpose read by a matmul and by a kernel: the matmul reads the
// stored tensor, the kernel keeps its transpose.
// CHECK-LABEL: func.func @shared_transpose
// CHECK: %[[T:.+]] = gpuc.transpose %arg0
// CHECK: gpuc.matmul %arg0, %arg1 lhs_perm = [0, 2, 1, 3]
// CHECK: gpuc.relu %[[T]]
func.func @shared_transpose(%x: tensor<2x5x3x4xf32>, %w: tensor<2x3x4x6xf32>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>) {
  %t = gpuc.transpose %x perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %y = gpuc.matmul %t, %w : (tensor<2x3x5x4xf32>, tensor<2x3x4x6xf32>) -> tensor<2x3x5x6xf32>
  %r = gpuc.relu %t : tensor<2x3x5x4xf32>
  return %y, %r : tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>
}

// -----

// No matrix dimension of the transposed operand is contiguous, and a
// result read twice keeps its own layout: both transposes stay.
// CHECK-LABEL: func.func @not_expressible
// CHECK: gpuc.transpose %arg0 perm = [2, 0, 1]
// CHECK: %[[Y:.+]] = gpuc.matmul %{{.+}}, %arg1 : (tensor<6x4x5xf32>, tensor<6x5x7xf32>) -> tensor<6x4x7xf32>
// CHECK: gpuc.transpose %[[Y]] perm = [0, 2, 1]
func.func @not_expressible(%x: tensor<4x5x6xf32>, %w: tensor<6x5x7xf32>) -> (tensor<6x7x4xf32>, tensor<6x4x7xf32>) {
  %a = gpuc.transpose %x perm = [2, 0, 1] : tensor<4x5x6xf32> -> tensor<6x4x5xf32>
  %y = gpuc.matmul %a, %w : (tensor<6x4x5xf32>, tensor<6x5x7xf32>) -> tensor<6x4x7xf32>
  %o = gpuc.transpose %y perm = [0, 2, 1] : tensor<6x4x7xf32> -> tensor<6x7x4xf32>
  return %o, %y : tensor<6x7x4xf32>, tensor<6x4x7xf32>
}

// -----

// A result stored transposed in its matrix would need the product's own
// transpose (C^T = B^T A^T): not a layout, the transpose stays.
// CHECK-LABEL: func.func @matrix_transposed_result
// CHECK: %[[Y:.+]] = gpuc.matmul %arg0, %arg1 :
// CHECK: gpuc.transpose %[[Y]] perm = [1, 0]
func.func @matrix_transposed_result(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>) -> tensor<6x4xf32> {
  %y = gpuc.matmul %a, %b : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %o = gpuc.transpose %y perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  return %o : tensor<6x4xf32>
}

// -----

// The fused attention and its gradient take the bthd layout together: the
// projections' [B, T, H, D] rows are read and written as they are.
// CHECK-LABEL: func.func @attention
// CHECK-NOT: gpuc.transpose
// CHECK: %[[O:.+]], %[[L:.+]] = gpuc.attention %arg0, %arg1, %arg2 scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32> -> tensor<2x5x3x4xf32>, tensor<2x3x5xf32>
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = gpuc.attention_grad %arg0, %arg1, %arg2, %[[O]], %[[L]], %arg3 scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x3x5xf32>
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @attention(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>, %dy: tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) {
  %qh = gpuc.transpose %q perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = gpuc.transpose %k perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %vh = gpuc.transpose %v perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %o, %lse = gpuc.attention %qh, %kh, %vh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  %y = gpuc.transpose %o perm = [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dyh = gpuc.transpose %dy perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %dq, %dk, %dv = gpuc.attention_grad %qh, %kh, %vh, %o, %lse, %dyh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  %dqt = gpuc.transpose %dq perm = [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dkt = gpuc.transpose %dk perm = [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dvt = gpuc.transpose %dv perm = [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  return %y, %dqt, %dkt, %dvt : tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>
}

// -----

// Llama's rotary positions are elementwise work on the split query and key
// heads (here a gain), and grouped-query attention reads 2 key heads: the
// work's result is merged back to [B, T, H, D] rows for the attention, its
// gradient's reader splits the stored rows, and the result is stored as
// the merge reads it. The transposes that remain meet elementwise work
// (their kernels fuse them).
// CHECK-LABEL: func.func @rotary_grouped_attention
// CHECK: %[[QG:.+]] = gpuc.mul %{{.+}}, %arg4 : tensor<2x6x5x4xf32>
// CHECK: %[[QR:.+]] = gpuc.transpose %[[QG]] perm = [0, 2, 1, 3] : tensor<2x6x5x4xf32> -> tensor<2x5x6x4xf32>
// CHECK: %[[O:.+]], %[[L:.+]] = gpuc.attention %[[QR]], %arg1, %arg2 scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<2x5x6x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32> -> tensor<2x5x6x4xf32>, tensor<2x6x5xf32>
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = gpuc.attention_grad %[[QR]], %arg1, %arg2, %[[O]], %[[L]], %arg3 {{.+}} bthd
// CHECK: %[[DQH:.+]] = gpuc.transpose %[[DQ]] perm = [0, 2, 1, 3] : tensor<2x5x6x4xf32> -> tensor<2x6x5x4xf32>
// CHECK: %[[DQG:.+]] = gpuc.mul %[[DQH]], %arg4
// CHECK: return %[[O]], %[[DQG]], %[[DK]], %[[DV]]
func.func @rotary_grouped_attention(%q: tensor<2x5x6x4xf32>, %k: tensor<2x5x2x4xf32>, %v: tensor<2x5x2x4xf32>, %dy: tensor<2x5x6x4xf32>, %gain: tensor<2x6x5x4xf32>) -> (tensor<2x5x6x4xf32>, tensor<2x6x5x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>) {
  %qh = gpuc.transpose %q perm = [0, 2, 1, 3] : tensor<2x5x6x4xf32> -> tensor<2x6x5x4xf32>
  %qg = gpuc.mul %qh, %gain : tensor<2x6x5x4xf32>
  %kh = gpuc.transpose %k perm = [0, 2, 1, 3] : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %vh = gpuc.transpose %v perm = [0, 2, 1, 3] : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %o, %lse = gpuc.attention %qg, %kh, %vh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32> -> tensor<2x6x5x4xf32>, tensor<2x6x5xf32>
  %y = gpuc.transpose %o perm = [0, 2, 1, 3] : tensor<2x6x5x4xf32> -> tensor<2x5x6x4xf32>
  %dyh = gpuc.transpose %dy perm = [0, 2, 1, 3] : tensor<2x5x6x4xf32> -> tensor<2x6x5x4xf32>
  %dq, %dk, %dv = gpuc.attention_grad %qg, %kh, %vh, %o, %lse, %dyh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x6x5x4xf32>, tensor<2x6x5xf32>
  %dqg = gpuc.mul %dq, %gain : tensor<2x6x5x4xf32>
  %dkt = gpuc.transpose %dk perm = [0, 2, 1, 3] : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %dvt = gpuc.transpose %dv perm = [0, 2, 1, 3] : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  return %y, %dqg, %dkt, %dvt : tensor<2x5x6x4xf32>, tensor<2x6x5x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>
}

// -----

// nn.MultiheadAttention stores its heads [T, B*H, D] and attends over
// [B*H, T, D], reshaped to rank 4 as a batch of one: the reshapes only
// insert a 1, so they move to the far side of the transposes, and the
// fused attention reads and writes [1, T, B*H, D] rows, the bthd layout.
// CHECK-LABEL: func.func @multihead_attention
// CHECK-NOT: gpuc.transpose
// CHECK: %[[O:.+]], %[[L:.+]] = gpuc.attention %{{.+}}, %{{.+}}, %{{.+}} scale = 5.000000e-01 fill = 0xFFF0000000000000 bthd : tensor<1x5x6x4xf32>, tensor<1x5x6x4xf32>, tensor<1x5x6x4xf32> -> tensor<1x5x6x4xf32>, tensor<1x6x5xf32>
// CHECK: gpuc.reshape %[[O]] : tensor<1x5x6x4xf32> -> tensor<5x6x4xf32>
// CHECK: gpuc.attention_grad {{.+}} bthd : tensor<1x5x6x4xf32>, tensor<1x5x6x4xf32>, tensor<1x5x6x4xf32>, tensor<1x5x6x4xf32>, tensor<1x6x5xf32>
// CHECK-NOT: gpuc.transpose
// CHECK: return
func.func @multihead_attention(%q: tensor<5x6x4xf32>, %k: tensor<5x6x4xf32>, %v: tensor<5x6x4xf32>, %dy: tensor<5x6x4xf32>) -> (tensor<5x6x4xf32>, tensor<5x6x4xf32>, tensor<5x6x4xf32>, tensor<5x6x4xf32>) {
  %qt = gpuc.transpose %q perm = [1, 0, 2] : tensor<5x6x4xf32> -> tensor<6x5x4xf32>
  %kt = gpuc.transpose %k perm = [1, 0, 2] : tensor<5x6x4xf32> -> tensor<6x5x4xf32>
  %vt = gpuc.transpose %v perm = [1, 0, 2] : tensor<5x6x4xf32> -> tensor<6x5x4xf32>
  %qh = gpuc.reshape %qt : tensor<6x5x4xf32> -> tensor<1x6x5x4xf32>
  %kh = gpuc.reshape %kt : tensor<6x5x4xf32> -> tensor<1x6x5x4xf32>
  %vh = gpuc.reshape %vt : tensor<6x5x4xf32> -> tensor<1x6x5x4xf32>
  %o, %lse = gpuc.attention %qh, %kh, %vh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x6x5x4xf32>, tensor<1x6x5x4xf32>, tensor<1x6x5x4xf32> -> tensor<1x6x5x4xf32>, tensor<1x6x5xf32>
  %o3 = gpuc.reshape %o : tensor<1x6x5x4xf32> -> tensor<6x5x4xf32>
  %y = gpuc.transpose %o3 perm = [1, 0, 2] : tensor<6x5x4xf32> -> tensor<5x6x4xf32>
  %dyt = gpuc.transpose %dy perm = [1, 0, 2] : tensor<5x6x4xf32> -> tensor<6x5x4xf32>
  %dyh = gpuc.reshape %dyt : tensor<6x5x4xf32> -> tensor<1x6x5x4xf32>
  %dq, %dk, %dv = gpuc.attention_grad %qh, %kh, %vh, %o, %lse, %dyh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x6x5x4xf32>, tensor<1x6x5x4xf32>, tensor<1x6x5x4xf32>, tensor<1x6x5x4xf32>, tensor<1x6x5xf32>
  %dq3 = gpuc.reshape %dq : tensor<1x6x5x4xf32> -> tensor<6x5x4xf32>
  %dk3 = gpuc.reshape %dk : tensor<1x6x5x4xf32> -> tensor<6x5x4xf32>
  %dv3 = gpuc.reshape %dv : tensor<1x6x5x4xf32> -> tensor<6x5x4xf32>
  %dqt = gpuc.transpose %dq3 perm = [1, 0, 2] : tensor<6x5x4xf32> -> tensor<5x6x4xf32>
  %dkt = gpuc.transpose %dk3 perm = [1, 0, 2] : tensor<6x5x4xf32> -> tensor<5x6x4xf32>
  %dvt = gpuc.transpose %dv3 perm = [1, 0, 2] : tensor<6x5x4xf32> -> tensor<5x6x4xf32>
  return %y, %dqt, %dkt, %dvt : tensor<5x6x4xf32>, tensor<5x6x4xf32>, tensor<5x6x4xf32>, tensor<5x6x4xf32>
}

// -----

// A result something other than a head merge reads keeps the heads major
// layout, and so do its operands.
// CHECK-LABEL: func.func @attention_result_read_as_is
// CHECK: gpuc.transpose %arg0
// CHECK: gpuc.attention %{{.+}}, %{{.+}}, %{{.+}} scale = 5.000000e-01 fill = 0xFFF0000000000000 :
func.func @attention_result_read_as_is(%q: tensor<2x5x3x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32> {
  %qh = gpuc.transpose %q perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %o, %lse = gpuc.attention %qh, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>, tensor<2x3x5xf32>
  %r = gpuc.relu %o : tensor<2x3x5x4xf32>
  return %r : tensor<2x3x5x4xf32>
}

// -----

// A biased product (its bias added over the stored result's rows) keeps
// the transpose after it: the bias epilogue has no result layout.
// CHECK-LABEL: func.func @biased_result
// CHECK: %[[Y:.+]] = gpuc.matmul %arg0, %arg1 bias %arg2
// CHECK: gpuc.transpose %[[Y]]
func.func @biased_result(%x: tensor<2x5x4xf32>, %w: tensor<2x4x6xf32>, %b: tensor<6xf32>) -> tensor<5x2x6xf32> {
  %y = gpuc.matmul %x, %w bias %b : tensor<6xf32> : (tensor<2x5x4xf32>, tensor<2x4x6xf32>) -> tensor<2x5x6xf32>
  %t = gpuc.transpose %y perm = [1, 0, 2] : tensor<2x5x6xf32> -> tensor<5x2x6xf32>
  return %t : tensor<5x2x6xf32>
}

// -----

// nanoGPT's attention: one projection holds the queries, keys and values
// side by side in each token's row, split in three and into heads. Only
// matmuls read the slices, so each reads its window of the projection in
// place (the head split on top) and no slice is left to copy.
// CHECK-LABEL: func.func @qkv_windows
// CHECK-NOT: gpuc.slice
// CHECK: %[[S:.+]] = gpuc.matmul %arg0, %arg0 transpose_rhs lhs_window = <offset = 0, shape = [2, 4]> rhs_window = <offset = 8, shape = [2, 4]> lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] : (tensor<3x5x24xf32>, tensor<3x5x24xf32>) -> tensor<3x2x5x5xf32>
// CHECK: %[[Y:.+]] = gpuc.matmul %[[S]], %arg0 rhs_window = <offset = 16, shape = [2, 4]> rhs_perm = [0, 2, 1, 3] result_perm = [0, 2, 1, 3] : (tensor<3x2x5x5xf32>, tensor<3x5x24xf32>) -> tensor<3x5x2x4xf32>
// CHECK: return %[[Y]]
func.func @qkv_windows(%qkv: tensor<3x5x24xf32>) -> tensor<3x5x2x4xf32> {
  %q = gpuc.slice %qkv starts = [0, 0, 0] limits = [3, 5, 8] strides = [1, 1, 1] : tensor<3x5x24xf32> -> tensor<3x5x8xf32>
  %k = gpuc.slice %qkv starts = [0, 0, 8] limits = [3, 5, 16] strides = [1, 1, 1] : tensor<3x5x24xf32> -> tensor<3x5x8xf32>
  %v = gpuc.slice %qkv starts = [0, 0, 16] limits = [3, 5, 24] strides = [1, 1, 1] : tensor<3x5x24xf32> -> tensor<3x5x8xf32>
  %q4 = gpuc.reshape %q : tensor<3x5x8xf32> -> tensor<3x5x2x4xf32>
  %k4 = gpuc.reshape %k : tensor<3x5x8xf32> -> tensor<3x5x2x4xf32>
  %v4 = gpuc.reshape %v : tensor<3x5x8xf32> -> tensor<3x5x2x4xf32>
  %qh = gpuc.transpose %q4 perm = [0, 2, 1, 3] : tensor<3x5x2x4xf32> -> tensor<3x2x5x4xf32>
  %kh = gpuc.transpose %k4 perm = [0, 2, 1, 3] : tensor<3x5x2x4xf32> -> tensor<3x2x5x4xf32>
  %vh = gpuc.transpose %v4 perm = [0, 2, 1, 3] : tensor<3x5x2x4xf32> -> tensor<3x2x5x4xf32>
  %s = gpuc.matmul %qh, %kh transpose_rhs : (tensor<3x2x5x4xf32>, tensor<3x2x5x4xf32>) -> tensor<3x2x5x5xf32>
  %y = gpuc.matmul %s, %vh : (tensor<3x2x5x5xf32>, tensor<3x2x5x4xf32>) -> tensor<3x2x5x4xf32>
  %o = gpuc.transpose %y perm = [0, 2, 1, 3] : tensor<3x2x5x4xf32> -> tensor<3x5x2x4xf32>
  return %o : tensor<3x5x2x4xf32>
}

// -----

// A slice a kernel reads too stays a copy, and the matmul reads the copy:
// reading the window in place as well would keep the wider tensor alive
// beside it. A slice that skips columns is no window.
// CHECK-LABEL: func.func @slices_kept
// CHECK: %[[A:.+]] = gpuc.slice %arg0 starts = [0, 0] limits = [6, 4]
// CHECK: %[[B:.+]] = gpuc.slice %arg0 starts = [0, 4] limits = [6, 12] strides = [1, 2]
// CHECK: gpuc.matmul %[[A]], %arg1 :
// CHECK: gpuc.matmul %[[B]], %arg1 :
// CHECK: gpuc.relu %[[A]]
func.func @slices_kept(%x: tensor<6x12xf32>, %w: tensor<4x3xf32>) -> (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x4xf32>) {
  %a = gpuc.slice %x starts = [0, 0] limits = [6, 4] strides = [1, 1] : tensor<6x12xf32> -> tensor<6x4xf32>
  %b = gpuc.slice %x starts = [0, 4] limits = [6, 12] strides = [1, 2] : tensor<6x12xf32> -> tensor<6x4xf32>
  %ya = gpuc.matmul %a, %w : (tensor<6x4xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  %yb = gpuc.matmul %b, %w : (tensor<6x4xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  %r = gpuc.relu %a : tensor<6x4xf32>
  return %ya, %yb, %r : tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x4xf32>
}

// -----

// A plain column slice (no head split) is a window of one dimension; a
// transposed read of it stays a transpose flag over the window.
// CHECK-LABEL: func.func @column_slice
// CHECK-NOT: gpuc.slice
// CHECK: gpuc.matmul %arg0, %arg1 transpose_lhs lhs_window = <offset = 2, shape = [5]> : (tensor<6x9xf32>, tensor<6x3xf32>) -> tensor<5x3xf32>
func.func @column_slice(%x: tensor<6x9xf32>, %g: tensor<6x3xf32>) -> tensor<5x3xf32> {
  %a = gpuc.slice %x starts = [0, 2] limits = [6, 7] strides = [1, 1] : tensor<6x9xf32> -> tensor<6x5xf32>
  %y = gpuc.matmul %a, %g transpose_lhs : (tensor<6x5xf32>, tensor<6x3xf32>) -> tensor<5x3xf32>
  return %y : tensor<5x3xf32>
}

// -----

// A triangle is of the matrix as stored: the transpose before a triangle's
// lhs, and after a triangle's result, stay; the other operands fold.
// CHECK-LABEL: func.func @triangles_keep_their_matrices
// CHECK: %[[S:.+]] = gpuc.matmul %arg0, %arg0 transpose_rhs lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3] result_triangle gt bands 2
// CHECK: gpuc.transpose %[[S]]
// CHECK: %[[P:.+]] = gpuc.transpose %arg1
// CHECK: gpuc.matmul %[[P]], %arg0 rhs_perm = [0, 2, 1, 3] lhs_triangle gt bands 2
func.func @triangles_keep_their_matrices(%x: tensor<2x4x3x8xf32>, %p: tensor<2x4x3x4xf32>) -> (tensor<2x4x3x4xf32>, tensor<2x3x4x8xf32>) {
  %q = gpuc.transpose %x perm = [0, 2, 1, 3] : tensor<2x4x3x8xf32> -> tensor<2x3x4x8xf32>
  %s = gpuc.matmul %q, %q transpose_rhs result_triangle gt bands 2 : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x4xf32>
  %st = gpuc.transpose %s perm = [0, 2, 1, 3] : tensor<2x3x4x4xf32> -> tensor<2x4x3x4xf32>
  %pt = gpuc.transpose %p perm = [0, 2, 1, 3] : tensor<2x4x3x4xf32> -> tensor<2x3x4x4xf32>
  %o = gpuc.matmul %pt, %q lhs_triangle gt bands 2 : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %st, %o : tensor<2x4x3x4xf32>, tensor<2x3x4x8xf32>
}
