// RUN: gpuc-opt %s -split-input-file -canonicalize | FileCheck %s

// Shape arithmetic on constants folds away.
// CHECK-LABEL: func.func @shape_chain
// CHECK: %[[C:.+]] = gpuc.constant dense<[8, 2]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_chain() -> tensor<2xi64> {
  %s = gpuc.constant dense<[8, 16, 4]> : tensor<3xi64>
  %i = gpuc.constant dense<[0]> : tensor<1xi64>
  %n = gpuc.gather %s[%i] axis = 0 : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %k = gpuc.constant dense<[-1]> : tensor<1xi64>
  %c = gpuc.concat %n, %k axis = 0 : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %m1 = gpuc.constant dense<-1> : tensor<2xi64>
  %isneg = gpuc.compare eq, %c, %m1 : tensor<2xi64>
  %two = gpuc.constant dense<2> : tensor<2xi64>
  %r = gpuc.select %isneg, %two, %c : tensor<2xi1>, tensor<2xi64>
  return %r : tensor<2xi64>
}

// -----

// Identities and compositions of data movement.
// CHECK-LABEL: func.func @movement
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32>
// CHECK: %[[R:.+]] = gpuc.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NEXT: return %[[X]], %[[R]]
func.func @movement(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<24xf32>) {
  %t = gpuc.transpose %x perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %u = gpuc.transpose %t perm = [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
  %b = gpuc.broadcast %u : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %r1 = gpuc.reshape %b : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %r2 = gpuc.reshape %r1 : tensor<6x4xf32> -> tensor<24xf32>
  return %b, %r2 : tensor<2x3x4xf32>, tensor<24xf32>
}

// -----

// Large tensors are never duplicated into constants; division by zero is kept.
// CHECK-LABEL: func.func @no_fold
// CHECK: gpuc.div
func.func @no_fold() -> tensor<2xi64> {
  %a = gpuc.constant dense<[4, 5]> : tensor<2xi64>
  %z = gpuc.constant dense<[1, 0]> : tensor<2xi64>
  %d = gpuc.div %a, %z : tensor<2xi64>
  return %d : tensor<2xi64>
}

// -----

// A 16-bit float widened to f32 and narrowed back is itself; the other way
// round rounds, and stays.
// CHECK-LABEL: func.func @cast_round_trip
// CHECK-SAME: (%[[H:.+]]: tensor<4xf16>, %[[F:.+]]: tensor<4xf32>)
// CHECK: %[[W:.+]] = gpuc.cast %[[F]] : tensor<4xf32> to tensor<4xf16>
// CHECK: %[[R:.+]] = gpuc.cast %[[W]] : tensor<4xf16> to tensor<4xf32>
// CHECK: return %[[H]], %[[R]]
func.func @cast_round_trip(%h: tensor<4xf16>, %f: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xf32>) {
  %0 = gpuc.cast %h : tensor<4xf16> to tensor<4xf32>
  %1 = gpuc.cast %0 : tensor<4xf32> to tensor<4xf16>
  %2 = gpuc.cast %f : tensor<4xf32> to tensor<4xf16>
  %3 = gpuc.cast %2 : tensor<4xf16> to tensor<4xf32>
  return %1, %3 : tensor<4xf16>, tensor<4xf32>
}

// -----

// Indices known at compile time (a position embedding's) are grouped at
// compile time: -1 names row 2, and each row lists its positions in order.
// CHECK-LABEL: func.func @row_groups_of_constants
// CHECK-DAG: %[[OFFSETS:.+]] = gpuc.constant dense<[0, 1, 1, 4]> : tensor<4xi32>
// CHECK-DAG: %[[ORDER:.+]] = gpuc.constant dense<[2, 0, 1, 3]> : tensor<4xi32>
// CHECK: gpuc.segment_sum %arg0, %[[OFFSETS]], %[[ORDER]]
// CHECK-NOT: gpuc.row_groups
func.func @row_groups_of_constants(%u: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %ids = gpuc.constant dense<[2, -1, 0, 2]> : tensor<4xi64>
  %offsets, %order = gpuc.row_groups %ids rows = 3 : tensor<4xi64> -> tensor<4xi32>, tensor<4xi32>
  %g = gpuc.segment_sum %u, %offsets, %order axis = 0 : (tensor<4x2xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<3x2xf32>
  return %g : tensor<3x2xf32>
}

// -----

// An index outside the axis is left for the run-time check to report.
// CHECK-LABEL: func.func @row_groups_out_of_range
// CHECK: gpuc.row_groups
func.func @row_groups_out_of_range() -> (tensor<4xi32>, tensor<2xi32>) {
  %ids = gpuc.constant dense<[1, 3]> : tensor<2xi64>
  %offsets, %order = gpuc.row_groups %ids rows = 3 : tensor<2xi64> -> tensor<4xi32>, tensor<2xi32>
  return %offsets, %order : tensor<4xi32>, tensor<2xi32>
}

// -----

// A transpose of a matmul operand's last two dimensions is the operand's
// flag: the library reads the matrix as stored. Applied twice, it cancels.
// CHECK-LABEL: func.func @matmul_of_transposes
// CHECK-NOT: gpuc.transpose
// CHECK: %[[Y:.+]] = gpuc.matmul %arg0, %arg1 transpose_lhs : (tensor<3x2xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK: gpuc.matmul %arg0, %arg2 transpose_lhs : (tensor<3x2xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
func.func @matmul_of_transposes(%a: tensor<3x2xf32>, %b: tensor<3x4xf32>, %c: tensor<3x5xf32>) -> (tensor<2x4xf32>, tensor<2x5xf32>) {
  %t = gpuc.transpose %a perm = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  %0 = gpuc.matmul %t, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %u = gpuc.transpose %c perm = [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
  %1 = gpuc.matmul %t, %u transpose_rhs : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<2x5xf32>
}

// -----

// Batched: only a swap of the last two dimensions folds; moving a batch
// dimension does not.
// CHECK-LABEL: func.func @batched_matmul_of_transposes
// CHECK: %[[B:.+]] = gpuc.transpose %arg1 perm = [1, 0, 2]
// CHECK: gpuc.matmul %arg0, %[[B]] transpose_lhs : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
func.func @batched_matmul_of_transposes(%a: tensor<2x3x4xf32>, %b: tensor<3x2x5xf32>) -> tensor<2x4x5xf32> {
  %t = gpuc.transpose %a perm = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %u = gpuc.transpose %b perm = [1, 0, 2] : tensor<3x2x5xf32> -> tensor<2x3x5xf32>
  %0 = gpuc.matmul %t, %u : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----

// The gradient of a split into three slices, summed as zero pads of each,
// is one concatenation.
// CHECK-LABEL: func.func @sum_of_slice_pads
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x2xf32>, %[[K:[a-z0-9]+]]: tensor<4x2xf32>, %[[V:[a-z0-9]+]]: tensor<4x3xf32>
// CHECK-NEXT: %[[C:.+]] = gpuc.concat %[[Q]], %[[K]], %[[V]] axis = 1 : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<4x7xf32>
// CHECK-NEXT: return %[[C]]
func.func @sum_of_slice_pads(%q: tensor<4x2xf32>, %k: tensor<4x2xf32>, %v: tensor<4x3xf32>) -> tensor<4x7xf32> {
  %pv = gpuc.pad %v low = [0, 4] high = [0, 0] value = 0.0 : tensor<4x3xf32> -> tensor<4x7xf32>
  %pq = gpuc.pad %q low = [0, 0] high = [0, 5] value = 0.0 : tensor<4x2xf32> -> tensor<4x7xf32>
  %pk = gpuc.pad %k low = [0, 2] high = [0, 3] value = 0.0 : tensor<4x2xf32> -> tensor<4x7xf32>
  %s = gpuc.add %pq, %pk : tensor<4x7xf32>
  %t = gpuc.add %pv, %s : tensor<4x7xf32>
  return %t : tensor<4x7xf32>
}

// -----

// Two slices that do not cover the axis stay padded; slices apart, a pad
// of another value, or pads differing on two axes are left alone.
// CHECK-LABEL: func.func @partial_slice_pads
// CHECK: %[[C:.+]] = gpuc.concat %arg0, %arg1 axis = 0 : (tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[P:.+]] = gpuc.pad %[[C]] low = [1, 0] high = [2, 0] value = 0.000000e+00 : tensor<3x4xf32> -> tensor<6x4xf32>
// CHECK-NOT: gpuc.concat
// CHECK: %[[A1:.+]] = gpuc.add %{{.+}}, %{{.+}} : tensor<6x4xf32>
// CHECK: %[[A2:.+]] = gpuc.add %{{.+}}, %{{.+}} : tensor<6x4xf32>
// CHECK: %[[A3:.+]] = gpuc.add %{{.+}}, %{{.+}} : tensor<6x6xf32>
// CHECK-NEXT: return %[[P]], %[[A1]], %[[A2]], %[[A3]]
func.func @partial_slice_pads(%a: tensor<1x4xf32>, %b: tensor<2x4xf32>, %c: tensor<1x4xf32>, %d: tensor<1x4xf32>, %e: tensor<1x4xf32>, %f: tensor<1x4xf32>, %g: tensor<1x4xf32>, %h: tensor<1x4xf32>) -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x6xf32>) {
  %pa = gpuc.pad %a low = [1, 0] high = [4, 0] value = 0.0 : tensor<1x4xf32> -> tensor<6x4xf32>
  %pb = gpuc.pad %b low = [2, 0] high = [2, 0] value = 0.0 : tensor<2x4xf32> -> tensor<6x4xf32>
  %ab = gpuc.add %pa, %pb : tensor<6x4xf32>
  %pc = gpuc.pad %c low = [0, 0] high = [5, 0] value = 0.0 : tensor<1x4xf32> -> tensor<6x4xf32>
  %pd = gpuc.pad %d low = [2, 0] high = [3, 0] value = 0.0 : tensor<1x4xf32> -> tensor<6x4xf32>
  %apart = gpuc.add %pc, %pd : tensor<6x4xf32>
  %pe = gpuc.pad %e low = [0, 0] high = [5, 0] value = 1.0 : tensor<1x4xf32> -> tensor<6x4xf32>
  %pf = gpuc.pad %f low = [1, 0] high = [4, 0] value = 0.0 : tensor<1x4xf32> -> tensor<6x4xf32>
  %ones = gpuc.add %pe, %pf : tensor<6x4xf32>
  %pg = gpuc.pad %g low = [0, 0] high = [5, 2] value = 0.0 : tensor<1x4xf32> -> tensor<6x6xf32>
  %ph = gpuc.pad %h low = [1, 2] high = [4, 0] value = 0.0 : tensor<1x4xf32> -> tensor<6x6xf32>
  %two = gpuc.add %pg, %ph : tensor<6x6xf32>
  return %ab, %apart, %ones, %two : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x6xf32>
}

// -----

// The square root of a constant (PyTorch's export of
// scaled_dot_product_attention scales Q and K by sqrt(scale)), as sqrtf
// rounds it; of a value, it stays.
// CHECK-LABEL: func.func @sqrt_fold
// CHECK-DAG: gpuc.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG: gpuc.constant dense<1.41421354> : tensor<f32>
// CHECK: gpuc.sqrt %arg0
func.func @sqrt_fold(%x: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %q = gpuc.constant dense<2.500000e-01> : tensor<f32>
  %t = gpuc.constant dense<2.000000e+00> : tensor<f32>
  %a = gpuc.sqrt %q : tensor<f32>
  %b = gpuc.sqrt %t : tensor<f32>
  %c = gpuc.sqrt %x : tensor<f32>
  return %a, %b, %c : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// A comparison of indices folds to a mask through the broadcasts that
// widen them, which are not themselves folded into constants of the mask's
// size (integers fold up to 2^20 elements; booleans up to 2^28).
// CHECK-LABEL: func.func @mask_of_broadcast_indices
// CHECK: %[[CORNER:.+]] = gpuc.constant dense<{{\[\[\[\[}}false, true]]], {{\[\[\[}}true, true]]]]> : tensor<2x1x1x2xi1>
// CHECK: return %[[CORNER]]
// CHECK-NOT: gpuc.compare
// CHECK-NOT: gpuc.broadcast
func.func @mask_of_broadcast_indices() -> tensor<2x1x1x2xi1> {
  %rows = gpuc.constant dense<[[[[0]]], [[[5]]]]> : tensor<2x1x1x1xi64>
  %cols = gpuc.constant dense<[[[[5, 0]]]]> : tensor<1x1x1x2xi64>
  %r = gpuc.broadcast %rows : tensor<2x1x1x1xi64> -> tensor<2x512x1024x2xi64>
  %c = gpuc.broadcast %cols : tensor<1x1x1x2xi64> -> tensor<2x512x1024x2xi64>
  %m = gpuc.compare ge, %r, %c : tensor<2x512x1024x2xi64>
  %corner = gpuc.slice %m starts = [0, 511, 1023, 0] limits = [2, 512, 1024, 2] strides = [1, 1, 1, 1] : tensor<2x512x1024x2xi1> -> tensor<2x1x1x2xi1>
  return %corner : tensor<2x1x1x2xi1>
}

// -----

// Past the limit for floats, an addition stays an op (a constant of 8 MiB
// would be read at run time where a broadcast fuses into its reader).
// CHECK-LABEL: func.func @large_float_result_stays
// CHECK: gpuc.add
func.func @large_float_result_stays() -> tensor<2x1024x1024xf32> {
  %a = gpuc.constant dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>
  %b = gpuc.constant dense<3.0> : tensor<2x1024x1024xf32>
  %w = gpuc.broadcast %a : tensor<2x1x1xf32> -> tensor<2x1024x1024xf32>
  %s = gpuc.add %w, %b : tensor<2x1024x1024xf32>
  return %s : tensor<2x1024x1024xf32>
}

// -----

// PyTorch's export of scaled_dot_product_attention transposes K as
// [B*H, T, D] between reshapes of [B, H, T, D]. The transpose moves before
// the reshape, the reshapes fold, and with the fused attention's own
// transpose back the chain is K.
// CHECK-LABEL: func.func @transpose_between_leading_reshapes
// CHECK-NEXT: return %arg0
func.func @transpose_between_leading_reshapes(%k: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  %r = gpuc.reshape %k : tensor<2x3x4x5xf32> -> tensor<6x4x5xf32>
  %t = gpuc.transpose %r perm = [0, 2, 1] : tensor<6x4x5xf32> -> tensor<6x5x4xf32>
  %kt = gpuc.reshape %t : tensor<6x5x4xf32> -> tensor<2x3x5x4xf32>
  %back = gpuc.transpose %kt perm = [0, 1, 3, 2] : tensor<2x3x5x4xf32> -> tensor<2x3x4x5xf32>
  return %back : tensor<2x3x4x5xf32>
}

// -----

// A transpose that moves a dimension the reshape made stays after it.
// CHECK-LABEL: func.func @transpose_of_merged_dimension
// CHECK: %[[R:.+]] = gpuc.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: gpuc.transpose %[[R]] perm = [1, 0]
func.func @transpose_of_merged_dimension(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %r = gpuc.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %t = gpuc.transpose %r perm = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
  return %t : tensor<4x6xf32>
}

// -----

// A sum over a reshape that merges the summed dimensions sums the
// reshape's input: Hugging Face's bias gradient over [B*T, C] reads the
// [B, T, C] gradient as the layer norm's weight gradient does.
// Mixed precision's cast to f32 between them moves onto the input: the
// same cast as the other sum's, which CSE (after the canonicalizer) makes
// one.
// CHECK-LABEL: func.func @reduce_over_merged_dims
// CHECK-NEXT: %[[SUM:.+]] = gpuc.reduce_sum %arg0 axes = [0, 1] : tensor<4x8x16xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[WIDE:.+]] = gpuc.cast %arg1 : tensor<4x8x16xbf16> to tensor<4x8x16xf32>
// CHECK-NEXT: %[[BIAS:.+]] = gpuc.reduce_sum %[[WIDE]] axes = [0, 1] : tensor<4x8x16xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[WIDE3:.+]] = gpuc.cast %arg1 : tensor<4x8x16xbf16> to tensor<4x8x16xf32>
// CHECK-NEXT: %[[SCALE:.+]] = gpuc.reduce_sum %[[WIDE3]] axes = [0, 1] : tensor<4x8x16xf32> -> tensor<16xf32>
// CHECK-NEXT: return %[[SUM]], %[[BIAS]], %[[SCALE]]
func.func @reduce_over_merged_dims(%x: tensor<4x8x16xf32>, %g: tensor<4x8x16xbf16>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %r = gpuc.reshape %x : tensor<4x8x16xf32> -> tensor<32x16xf32>
  %s = gpuc.reduce_sum %r axes = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %rows = gpuc.reshape %g : tensor<4x8x16xbf16> -> tensor<32x16xbf16>
  %wide = gpuc.cast %rows : tensor<32x16xbf16> to tensor<32x16xf32>
  %bias = gpuc.reduce_sum %wide axes = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %wide3 = gpuc.cast %g : tensor<4x8x16xbf16> to tensor<4x8x16xf32>
  %scale = gpuc.reduce_sum %wide3 axes = [0, 1] : tensor<4x8x16xf32> -> tensor<16xf32>
  return %s, %bias, %scale : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Kept dimensions that the reshape merged are merged after the reduction,
// and with keep_dims each reduced run keeps its 1s until that reshape; a
// unit dimension joins a run.
// CHECK-LABEL: func.func @reduce_keeps_merged_dims
// CHECK-NEXT: %[[MAX:.+]] = gpuc.reduce_max %arg0 axes = [2, 3] keep_dims : tensor<2x3x1x5x7xf32> -> tensor<2x3x1x1x7xf32>
// CHECK-NEXT: %[[ROWS:.+]] = gpuc.reshape %[[MAX]] : tensor<2x3x1x1x7xf32> -> tensor<6x1x7xf32>
// CHECK-NEXT: %[[MEAN:.+]] = gpuc.reduce_mean %arg0 axes = [0, 1, 4] : tensor<2x3x1x5x7xf32> -> tensor<1x5xf32>
// CHECK-NEXT: %[[COLUMN:.+]] = gpuc.reshape %[[MEAN]] : tensor<1x5xf32> -> tensor<5xf32>
// CHECK-NEXT: return %[[ROWS]], %[[COLUMN]]
func.func @reduce_keeps_merged_dims(%x: tensor<2x3x1x5x7xf32>) -> (tensor<6x1x7xf32>, tensor<5xf32>) {
  %r = gpuc.reshape %x : tensor<2x3x1x5x7xf32> -> tensor<6x5x7xf32>
  %m = gpuc.reduce_max %r axes = [1] keep_dims : tensor<6x5x7xf32> -> tensor<6x1x7xf32>
  %a = gpuc.reduce_mean %r axes = [0, 2] : tensor<6x5x7xf32> -> tensor<5xf32>
  return %m, %a : tensor<6x1x7xf32>, tensor<5xf32>
}

// -----

// A reshape that splits a dimension stays: the sum reads it.
// CHECK-LABEL: func.func @reduce_over_split_dims
// CHECK-NEXT: gpuc.reshape %arg0 : tensor<32x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: gpuc.reduce_sum %{{.+}} axes = [1]
func.func @reduce_over_split_dims(%x: tensor<32x16xf32>) -> tensor<4x16xf32> {
  %r = gpuc.reshape %x : tensor<32x16xf32> -> tensor<4x8x16xf32>
  %s = gpuc.reduce_sum %r axes = [1] : tensor<4x8x16xf32> -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// The reciprocal of a constant (an exported attention's 1 / sqrt(d),
// computed in the step) folds to the f32 quotient; of a value, it stays.
// select(c, true, false) of booleans is c (Trilu of ones, imported);
// select(c, false, true) stays a select.
// CHECK-LABEL: func.func @reciprocal_and_boolean_select
// CHECK-DAG: %[[QUARTER:.+]] = gpuc.constant dense<2.500000e-01> : tensor<f32>
// CHECK-DAG: %[[THIRD:.+]] = gpuc.constant dense<0.333333343> : tensor<f32>
// CHECK-DAG: %[[R:.+]] = gpuc.reciprocal %arg0
// CHECK-DAG: %[[FLIPPED:.+]] = gpuc.select %arg1, %{{.+}}, %{{.+}} : tensor<3xi1>, tensor<3xi1>
// CHECK: return %[[QUARTER]], %[[THIRD]], %[[R]], %arg1, %[[FLIPPED]]
func.func @reciprocal_and_boolean_select(%x: tensor<f32>, %c: tensor<3xi1>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<3xi1>, tensor<3xi1>) {
  %four = gpuc.constant dense<4.000000e+00> : tensor<f32>
  %three = gpuc.constant dense<3.000000e+00> : tensor<f32>
  %a = gpuc.reciprocal %four : tensor<f32>
  %b = gpuc.reciprocal %three : tensor<f32>
  %r = gpuc.reciprocal %x : tensor<f32>
  %t = gpuc.constant dense<true> : tensor<3xi1>
  %f = gpuc.constant dense<false> : tensor<3xi1>
  %same = gpuc.select %c, %t, %f : tensor<3xi1>, tensor<3xi1>
  %flipped = gpuc.select %c, %f, %t : tensor<3xi1>, tensor<3xi1>
  return %a, %b, %r, %same, %flipped : tensor<f32>, tensor<f32>, tensor<f32>, tensor<3xi1>, tensor<3xi1>
}

// -----

// A gather of a run of consecutive indices is a slice of its table (the
// table itself where the run covers it: a model's position embeddings);
// negative indices count from the end. Others stay gathers.
// CHECK-LABEL: func.func @gather_of_range
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK: %[[S:.+]] = gpuc.slice %[[T]] starts = [2, 0] limits = [5, 4] strides = [1, 1] : tensor<8x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %[[N:.+]] = gpuc.slice %[[T]] starts = [6, 0] limits = [8, 4]
// CHECK-NEXT: %[[G:.+]] = gpuc.gather %[[T]]
// CHECK-NEXT: %[[H:.+]] = gpuc.gather %[[T]]
// CHECK-NEXT: return %[[T]], %[[S]], %[[N]], %[[G]], %[[H]]
func.func @gather_of_range(%t: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x2x4xf32>) {
  %all = gpuc.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %whole = gpuc.gather %t[%all] axis = 0 : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %run = gpuc.constant dense<[2, 3, 4]> : tensor<3xi64>
  %part = gpuc.gather %t[%run] axis = 0 : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %neg = gpuc.constant dense<[-2, -1]> : tensor<2xi64>
  %end = gpuc.gather %t[%neg] axis = 0 : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %gap = gpuc.constant dense<[1, 3]> : tensor<2xi64>
  %skip = gpuc.gather %t[%gap] axis = 0 : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %grid = gpuc.constant dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
  %rows = gpuc.gather %t[%grid] axis = 0 : (tensor<8x4xf32>, tensor<2x2xi64>) -> tensor<2x2x4xf32>
  return %whole, %part, %end, %skip, %rows : tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x2x4xf32>
}

// -----

// Along an inner axis too (a column range).
// CHECK-LABEL: func.func @gather_columns
// CHECK-NEXT: gpuc.slice %{{.+}} starts = [0, 1] limits = [8, 3] strides = [1, 1] : tensor<8x4xf32> -> tensor<8x2xf32>
func.func @gather_columns(%t: tensor<8x4xf32>) -> tensor<8x2xf32> {
  %i = gpuc.constant dense<[1, 2]> : tensor<2xi32>
  %g = gpuc.gather %t[%i] axis = 1 : (tensor<8x4xf32>, tensor<2xi32>) -> tensor<8x2xf32>
  return %g : tensor<8x2xf32>
}
