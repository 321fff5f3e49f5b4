// RUN: gpuc-opt %s --gpuc-gemm-epilogues -split-input-file | FileCheck %s

// An f32 linear layer: the add of the broadcast bias becomes the matmul's
// epilogue, whichever side of the add the bias is on.
// CHECK-LABEL: func.func @f32_linear
// CHECK: %[[Y:.+]] = gpuc.matmul %arg0, %arg1 transpose_rhs bias %arg2 : tensor<8xf32> : (tensor<4x6xf32>, tensor<8x6xf32>) -> tensor<4x8xf32>
// CHECK-NOT: gpuc.add
// CHECK: gpuc.relu %[[Y]]
func.func @f32_linear(%x: tensor<4x6xf32>, %w: tensor<8x6xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %p = gpuc.matmul %x, %w transpose_rhs : (tensor<4x6xf32>, tensor<8x6xf32>) -> tensor<4x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %s = gpuc.add %bb, %p : tensor<4x8xf32>
  %r = gpuc.relu %s : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A bf16 product reshaped (its columns kept), widened, biased and stored in
// bf16 again (autocast's linear layer): the bias is cast to bf16 and the
// GEMM stores the biased product; the reshape follows it.
// CHECK-LABEL: func.func @bf16_stored
// CHECK: %[[B:.+]] = gpuc.cast %arg2 : tensor<8xf32> to tensor<8xbf16>
// CHECK: %[[Y:.+]] = gpuc.matmul %arg0, %arg1 bias %[[B]] : tensor<8xbf16> : (tensor<6x4xbf16>, tensor<4x8xbf16>) -> tensor<6x8xbf16>
// CHECK: %[[R:.+]] = gpuc.reshape %[[Y]] : tensor<6x8xbf16> -> tensor<2x3x8xbf16>
// CHECK-NOT: gpuc.add
// CHECK: return %[[R]]
func.func @bf16_stored(%x: tensor<6x4xbf16>, %w: tensor<4x8xbf16>, %b: tensor<8xf32>) -> tensor<2x3x8xbf16> {
  %p = gpuc.matmul %x, %w : (tensor<6x4xbf16>, tensor<4x8xbf16>) -> tensor<6x8xbf16>
  %r = gpuc.reshape %p : tensor<6x8xbf16> -> tensor<2x3x8xbf16>
  %w32 = gpuc.cast %r : tensor<2x3x8xbf16> to tensor<2x3x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<2x3x8xf32>
  %s = gpuc.add %w32, %bb : tensor<2x3x8xf32>
  %y = gpuc.cast %s : tensor<2x3x8xf32> to tensor<2x3x8xbf16>
  return %y : tensor<2x3x8xbf16>
}

// -----

// A bias held as [1, N], and one computed after the product: the epilogue
// takes the vector where the add is, so the bias is defined before it.
// CHECK-LABEL: func.func @computed_bias
// CHECK: %[[N:.+]] = gpuc.neg %arg2
// CHECK: %[[V:.+]] = gpuc.reshape %[[N]] : tensor<1x8xf32> -> tensor<8xf32>
// CHECK: gpuc.matmul %arg0, %arg1 bias %[[V]] : tensor<8xf32>
func.func @computed_bias(%x: tensor<4x6xf32>, %w: tensor<6x8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %p = gpuc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %n = gpuc.neg %b : tensor<1x8xf32>
  %bb = gpuc.broadcast %n : tensor<1x8xf32> -> tensor<4x8xf32>
  %s = gpuc.add %p, %bb : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// A bf16 product whose biased sum flows on in f32 (a GELU's input) keeps
// its add: storing the sum in bf16 would round it where the program does
// not.
// CHECK-LABEL: func.func @sum_flows_on_in_f32
// CHECK: gpuc.matmul %arg0, %arg1 : (tensor<6x4xbf16>, tensor<4x8xbf16>) -> tensor<6x8xbf16>
// CHECK: gpuc.add
func.func @sum_flows_on_in_f32(%x: tensor<6x4xbf16>, %w: tensor<4x8xbf16>, %b: tensor<8xf32>) -> tensor<6x8xf32> {
  %p = gpuc.matmul %x, %w : (tensor<6x4xbf16>, tensor<4x8xbf16>) -> tensor<6x8xbf16>
  %w32 = gpuc.cast %p : tensor<6x8xbf16> to tensor<6x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<6x8xf32>
  %s = gpuc.add %w32, %bb : tensor<6x8xf32>
  %e = gpuc.erf %s : tensor<6x8xf32>
  return %e : tensor<6x8xf32>
}

// -----

// Not a linear layer's bias: a broadcast over rows (not the last
// dimension), a product read twice, a reshape that moves the columns, and
// an accumulating product all keep their adds.
// CHECK-LABEL: func.func @not_epilogues
// CHECK-NOT: bias
// CHECK-COUNT-4: gpuc.add
func.func @not_epilogues(%x: tensor<4x6xf32>, %w: tensor<6x8xf32>, %rows: tensor<4x1xf32>, %b: tensor<8xf32>, %b2: tensor<2xf32>, %acc: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<16x2xf32>, tensor<4x8xf32>) {
  %p = gpuc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %br = gpuc.broadcast %rows : tensor<4x1xf32> -> tensor<4x8xf32>
  %s1 = gpuc.add %p, %br : tensor<4x8xf32>
  %r = gpuc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %s2 = gpuc.add %r, %bb : tensor<4x8xf32>
  %t = gpuc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %tr = gpuc.reshape %t : tensor<4x8xf32> -> tensor<16x2xf32>
  %bb2 = gpuc.broadcast %b2 : tensor<2xf32> -> tensor<16x2xf32>
  %s3 = gpuc.add %tr, %bb2 : tensor<16x2xf32>
  %u = gpuc.matmul %x, %w plus %acc : tensor<4x8xf32> : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %s4 = gpuc.add %u, %bb : tensor<4x8xf32>
  return %s1, %s2, %r, %s3, %s4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<16x2xf32>, tensor<4x8xf32>
}

// -----

// Backward's sum of three projections' input gradients (query, key and
// value read one normalized value): each GEMM after the first adds its
// product to the sum so far (`plus`), and no add is left.
// CHECK-LABEL: func.func @summed_products
// CHECK: %[[Q:.+]] = gpuc.matmul %arg0, %arg3 : (tensor<6x8xbf16>, tensor<8x4xbf16>) -> tensor<6x4xbf16>
// CHECK: %[[K:.+]] = gpuc.matmul %arg1, %arg4 plus %[[Q]] : tensor<6x4xbf16>
// CHECK: %[[V:.+]] = gpuc.matmul %arg2, %arg5 plus %[[K]] : tensor<6x4xbf16>
// CHECK-NOT: gpuc.add
// CHECK: return %[[V]]
func.func @summed_products(%dq: tensor<6x8xbf16>, %dk: tensor<6x8xbf16>, %dv: tensor<6x8xbf16>, %wq: tensor<8x4xbf16>, %wk: tensor<8x4xbf16>, %wv: tensor<8x4xbf16>) -> tensor<6x4xbf16> {
  %q = gpuc.matmul %dq, %wq : (tensor<6x8xbf16>, tensor<8x4xbf16>) -> tensor<6x4xbf16>
  %k = gpuc.matmul %dk, %wk : (tensor<6x8xbf16>, tensor<8x4xbf16>) -> tensor<6x4xbf16>
  %v = gpuc.matmul %dv, %wv : (tensor<6x8xbf16>, tensor<8x4xbf16>) -> tensor<6x4xbf16>
  %qk = gpuc.add %q, %k : tensor<6x4xbf16>
  %s = gpuc.add %qk, %v : tensor<6x4xbf16>
  return %s : tensor<6x4xbf16>
}

// -----

// A product something else reads too, a product plus another value, and
// products with a layout of their own stay as they are: accumulating would
// copy the sum so far, add a term no GEMM computes, or accumulate into a
// result the libraries write through a layout.
// CHECK-LABEL: func.func @products_kept
// CHECK-NOT: plus
// CHECK-COUNT-3: gpuc.add
// CHECK-NOT: plus
func.func @products_kept(%a: tensor<6x8xf32>, %w: tensor<8x4xf32>, %x: tensor<6x4xf32>, %l: tensor<2x4x3x5xf32>, %r: tensor<2x4x5x6xf32>) -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<2x3x4x6xf32>) {
  %p = gpuc.matmul %a, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %q = gpuc.matmul %a, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %s = gpuc.add %p, %q : tensor<6x4xf32>
  %o = gpuc.matmul %a, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %t = gpuc.add %x, %o : tensor<6x4xf32>
  %m = gpuc.matmul %l, %r result_perm = [0, 2, 1, 3] : (tensor<2x4x3x5xf32>, tensor<2x4x5x6xf32>) -> tensor<2x3x4x6xf32>
  %n = gpuc.matmul %l, %r result_perm = [0, 2, 1, 3] : (tensor<2x4x3x5xf32>, tensor<2x4x5x6xf32>) -> tensor<2x3x4x6xf32>
  %u = gpuc.add %m, %n : tensor<2x3x4x6xf32>
  return %s, %p, %t, %u : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<2x3x4x6xf32>
}
