// RUN: gpuc-opt %s --gpuc-form-attention -split-input-file | FileCheck %s

// nanoGPT: (q @ k^T) * c, masked_fill(mask == 0, -inf), softmax, @ v. The
// mask's broadcast is dropped (the op broadcasts it); k^T becomes k.
// CHECK-LABEL: func.func @masked_fill
// CHECK: %[[EQ:.+]] = gpuc.compare eq, %arg3
// CHECK: %[[K:.+]] = gpuc.transpose %arg1 perm = [0, 1, 3, 2] : tensor<2x3x4x6xf32> -> tensor<2x3x6x4xf32>
// CHECK: %[[O:.+]], %{{.+}} = gpuc.attention %arg0, %[[K]], %arg2 mask %[[EQ]] : tensor<1x1x6x6xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32> -> tensor<2x3x6x4xf32>, tensor<2x3x6xf32>
// CHECK-NOT: gpuc.softmax
// CHECK: return %[[O]]
func.func @masked_fill(%q: tensor<2x3x6x4xf32>, %kt: tensor<2x3x4x6xf32>, %v: tensor<2x3x6x4xf32>, %bias: tensor<1x1x6x6xf32>) -> tensor<2x3x6x4xf32> {
  %c = gpuc.constant dense<5.000000e-01> : tensor<2x3x6x6xf32>
  %zero = gpuc.constant dense<0.000000e+00> : tensor<1x1x6x6xf32>
  %ninf = gpuc.constant dense<0xFF800000> : tensor<2x3x6x6xf32>
  %s = gpuc.matmul %q, %kt : (tensor<2x3x6x4xf32>, tensor<2x3x4x6xf32>) -> tensor<2x3x6x6xf32>
  %scaled = gpuc.mul %s, %c : tensor<2x3x6x6xf32>
  %eq = gpuc.compare eq, %bias, %zero : tensor<1x1x6x6xf32>
  %wide = gpuc.broadcast %eq : tensor<1x1x6x6xi1> -> tensor<2x3x6x6xi1>
  %masked = gpuc.select %wide, %ninf, %scaled : tensor<2x3x6x6xi1>, tensor<2x3x6x6xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<2x3x6x6xf32>
  %o = gpuc.matmul %p, %v : (tensor<2x3x6x6xf32>, tensor<2x3x6x4xf32>) -> tensor<2x3x6x4xf32>
  return %o : tensor<2x3x6x4xf32>
}

// -----

// PyTorch's export of scaled_dot_product_attention(is_causal=True): Q and K^T
// each scaled by sqrt(scale), a constant of zeros and -inf added, dropout on
// the weights. The constant becomes a boolean mask at its smallest shape.
// CHECK-LABEL: func.func @sdpa_export
// CHECK: %[[MASK:.+]] = gpuc.constant dense<{{\[\[\[\[}}false, true, true], [false, false, true], [false, false, false]]]]> : tensor<1x1x3x3xi1>
// CHECK: gpuc.attention %arg0, %{{.+}}, %arg2 mask %[[MASK]] : tensor<1x1x3x3xi1> key %arg3 scale = 2.500000e-01 fill = 0xFFF0000000000000 {dropout = 1.000000e-01 : f64, stream = 2 : i64}
func.func @sdpa_export(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>, %key: tensor<2xi64>) -> tensor<2x2x3x4xf32> {
  %half = gpuc.constant dense<5.000000e-01> : tensor<2x2x3x4xf32>
  %halfT = gpuc.constant dense<5.000000e-01> : tensor<2x2x4x3xf32>
  %triu = gpuc.constant dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %qs = gpuc.mul %q, %half : tensor<2x2x3x4xf32>
  %kt = gpuc.transpose %k perm = [0, 1, 3, 2] : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %ks = gpuc.mul %kt, %halfT : tensor<2x2x4x3xf32>
  %s = gpuc.matmul %qs, %ks : (tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x3x3xf32>
  %wide = gpuc.broadcast %triu : tensor<3x3xf32> -> tensor<2x2x3x3xf32>
  %masked = gpuc.add %s, %wide : tensor<2x2x3x3xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<2x2x3x3xf32>
  %d = gpuc.dropout %p, %key stream = 2 ratio = 1.000000e-01 : tensor<2x2x3x3xf32>
  %o = gpuc.matmul %d, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// nn.MultiheadAttention's rank-3 [B*H, T, D] GEMMs, the scale a division,
// a where() that keeps where the mask is true with a finite fill: reshapes
// (free) to rank 4 around the op.
// CHECK-LABEL: func.func @rank3_keeps
// CHECK-DAG: %[[Q:.+]] = gpuc.reshape %arg0 : tensor<6x5x4xf32> -> tensor<1x6x5x4xf32>
// CHECK-DAG: %[[M:.+]] = gpuc.reshape %arg3 : tensor<6x1x7xi1> -> tensor<1x6x1x7xi1>
// CHECK: %[[O:.+]], %{{.+}} = gpuc.attention %[[Q]], %{{.+}}, %{{.+}} mask %[[M]] : tensor<1x6x1x7xi1> scale = 5.000000e-01 fill = -1.000000e+04 {mask_keeps}
// CHECK: gpuc.reshape %[[O]] : tensor<1x6x5x8xf32> -> tensor<6x5x8xf32>
func.func @rank3_keeps(%q: tensor<6x5x4xf32>, %k: tensor<6x7x4xf32>, %v: tensor<6x7x8xf32>, %keep: tensor<6x1x7xi1>) -> tensor<6x5x8xf32> {
  %two = gpuc.constant dense<2.000000e+00> : tensor<6x5x7xf32>
  %fill = gpuc.constant dense<-1.000000e+04> : tensor<6x5x7xf32>
  %s = gpuc.matmul %q, %k transpose_rhs : (tensor<6x5x4xf32>, tensor<6x7x4xf32>) -> tensor<6x5x7xf32>
  %scaled = gpuc.div %s, %two : tensor<6x5x7xf32>
  %wide = gpuc.broadcast %keep : tensor<6x1x7xi1> -> tensor<6x5x7xi1>
  %masked = gpuc.select %wide, %scaled, %fill : tensor<6x5x7xi1>, tensor<6x5x7xf32>
  %p = gpuc.softmax %masked axis = 2 : tensor<6x5x7xf32>
  %o = gpuc.matmul %p, %v : (tensor<6x5x7xf32>, tensor<6x7x8xf32>) -> tensor<6x5x8xf32>
  return %o : tensor<6x5x8xf32>
}

// -----

// The weights are a result too: the chain stays (the op would not save
// their memory, and they must exist).
// CHECK-LABEL: func.func @weights_returned
// CHECK-NOT: gpuc.attention
// CHECK: gpuc.softmax
func.func @weights_returned(%q: tensor<2x3x6x4xf32>, %k: tensor<2x3x6x4xf32>, %v: tensor<2x3x6x4xf32>) -> (tensor<2x3x6x4xf32>, tensor<2x3x6x6xf32>) {
  %s = gpuc.matmul %q, %k transpose_rhs : (tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>) -> tensor<2x3x6x6xf32>
  %p = gpuc.softmax %s axis = 3 : tensor<2x3x6x6xf32>
  %o = gpuc.matmul %p, %v : (tensor<2x3x6x6xf32>, tensor<2x3x6x4xf32>) -> tensor<2x3x6x4xf32>
  return %o, %p : tensor<2x3x6x4xf32>, tensor<2x3x6x6xf32>
}

// -----

// A softmax over another axis is not attention.
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-NOT: gpuc.attention
func.func @softmax_over_queries(%q: tensor<2x3x6x4xf32>, %k: tensor<2x3x6x4xf32>, %v: tensor<2x3x6x4xf32>) -> tensor<2x3x6x4xf32> {
  %s = gpuc.matmul %q, %k transpose_rhs : (tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>) -> tensor<2x3x6x6xf32>
  %p = gpuc.softmax %s axis = 2 : tensor<2x3x6x6xf32>
  %o = gpuc.matmul %p, %v : (tensor<2x3x6x6xf32>, tensor<2x3x6x4xf32>) -> tensor<2x3x6x4xf32>
  return %o : tensor<2x3x6x4xf32>
}

// -----

// Hugging Face's causal mask: the lowest float added where a key is masked
// (a score plus it is that fill in f32), and the dynamo exporter's
// where(isnan(p), 0, p) around the softmax, which no row of a causal mask
// can make NaN.
// CHECK-LABEL: func.func @lowest_fill_nan_guard
// CHECK: %[[MASK:.+]] = gpuc.constant dense<{{\[\[\[\[}}false, true, true], [false, false, true], [false, false, false]]]]> : tensor<1x1x3x3xi1>
// CHECK: gpuc.attention %arg0, %{{.+}}, %arg2 mask %[[MASK]] : tensor<1x1x3x3xi1> scale = 2.500000e-01 fill = -3.4028234663852886E+38 :
// CHECK-NOT: gpuc.softmax
func.func @lowest_fill_nan_guard(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %c = gpuc.constant dense<2.500000e-01> : tensor<2x2x3x3xf32>
  %zero = gpuc.constant dense<0.000000e+00> : tensor<2x2x3x3xf32>
  %low = gpuc.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %s = gpuc.matmul %q, %k transpose_rhs : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x3xf32>
  %scaled = gpuc.mul %s, %c : tensor<2x2x3x3xf32>
  %wide = gpuc.broadcast %low : tensor<3x3xf32> -> tensor<2x2x3x3xf32>
  %masked = gpuc.add %scaled, %wide : tensor<2x2x3x3xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<2x2x3x3xf32>
  %nan = gpuc.compare ne, %p, %p : tensor<2x2x3x3xf32>
  %g = gpuc.select %nan, %zero, %p : tensor<2x2x3x3xi1>, tensor<2x2x3x3xf32>
  %o = gpuc.matmul %g, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// A row that masks every key with -inf: the guard zeroes its weights, the
// fused kernels would not, so the chain stays.
// CHECK-LABEL: func.func @nan_guard_masked_row
// CHECK-NOT: gpuc.attention
// CHECK: gpuc.softmax
func.func @nan_guard_masked_row(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %zero = gpuc.constant dense<0.000000e+00> : tensor<2x2x3x3xf32>
  %ninf = gpuc.constant dense<[[0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %s = gpuc.matmul %q, %k transpose_rhs : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x3xf32>
  %wide = gpuc.broadcast %ninf : tensor<3x3xf32> -> tensor<2x2x3x3xf32>
  %masked = gpuc.add %s, %wide : tensor<2x2x3x3xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<2x2x3x3xf32>
  %nan = gpuc.compare ne, %p, %p : tensor<2x2x3x3xf32>
  %g = gpuc.select %nan, %zero, %p : tensor<2x2x3x3xi1>, tensor<2x2x3x3xf32>
  %o = gpuc.matmul %g, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// The same mask where it is too large to fold into one constant of floats
// (Hugging Face's over a batch at a context of 1,024): a select of zeros
// and the lowest float, added to the scores through a broadcast over heads.
// The select's condition keeps a key where it is true.
// CHECK-LABEL: func.func @additive_select_mask
// CHECK: %[[MASK:.+]] = gpuc.constant dense<{{\[\[\[\[}}true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
// CHECK: gpuc.attention %arg0, %{{.+}}, %arg2 mask %[[MASK]] : tensor<1x1x3x3xi1> scale = 2.500000e-01 fill = -3.4028234663852886E+38 {mask_keeps} :
// CHECK-NOT: gpuc.softmax
func.func @additive_select_mask(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %c = gpuc.constant dense<2.500000e-01> : tensor<2x2x3x3xf32>
  %keep = gpuc.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]], [[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<2x1x3x3xi1>
  %zero = gpuc.constant dense<0.000000e+00> : tensor<2x1x3x3xf32>
  %low = gpuc.constant dense<-3.40282347E+38> : tensor<2x1x3x3xf32>
  %s = gpuc.matmul %q, %k transpose_rhs : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x3xf32>
  %scaled = gpuc.mul %s, %c : tensor<2x2x3x3xf32>
  %additive = gpuc.select %keep, %zero, %low : tensor<2x1x3x3xi1>, tensor<2x1x3x3xf32>
  %wide = gpuc.broadcast %additive : tensor<2x1x3x3xf32> -> tensor<2x2x3x3xf32>
  %masked = gpuc.add %scaled, %wide : tensor<2x2x3x3xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<2x2x3x3xf32>
  %o = gpuc.matmul %p, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// A select of zeros and a fill that is not low enough to be a mask (-1e4
// added to a score is not -1e4) is an addition like any other.
// CHECK-LABEL: func.func @additive_select_not_a_mask
// CHECK-NOT: gpuc.attention
// CHECK: gpuc.softmax
func.func @additive_select_not_a_mask(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %keep = gpuc.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %zero = gpuc.constant dense<0.000000e+00> : tensor<3x3xf32>
  %low = gpuc.constant dense<-1.000000e+04> : tensor<3x3xf32>
  %s = gpuc.matmul %q, %k transpose_rhs : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x3xf32>
  %additive = gpuc.select %keep, %zero, %low : tensor<3x3xi1>, tensor<3x3xf32>
  %wide = gpuc.broadcast %additive : tensor<3x3xf32> -> tensor<2x2x3x3xf32>
  %masked = gpuc.add %s, %wide : tensor<2x2x3x3xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<2x2x3x3xf32>
  %o = gpuc.matmul %p, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// chargpt's export, canonicalized: the keys transposed by one [0, 2, 3, 1]
// permutation of their heads' reshape, the scale (a reciprocal computed in
// the step) folded, and Trilu's mask of iotas, key - query >= 1, selecting
// -inf. The mask stays the comparison (gpuc-decompose reads it as a
// triangle); canonicalize composes the keys' two transposes.
// CHECK-LABEL: func.func @trilu_mask
// CHECK: %[[ABOVE:.+]] = gpuc.compare ge, %{{.+}}, %{{.+}} : tensor<4x4xi64>
// CHECK: %[[M:.+]] = gpuc.reshape %[[ABOVE]] : tensor<4x4xi1> -> tensor<1x1x4x4xi1>
// CHECK: gpuc.attention %{{.+}}, %{{.+}}, %{{.+}} mask %[[M]] : tensor<1x1x4x4xi1> scale = 2.500000e-01 fill = 0xFFF0000000000000 :
// CHECK-NOT: gpuc.softmax
func.func @trilu_mask(%q: tensor<2x3x4x8xf32>, %k: tensor<2x4x3x8xf32>, %v: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  %quarter = gpuc.constant dense<2.500000e-01> : tensor<f32>
  %one = gpuc.constant dense<1> : tensor<4x4xi64>
  %ninf = gpuc.constant dense<0xFF800000> : tensor<2x3x4x4xf32>
  %query = gpuc.iota dim = 0 : tensor<4x4xi64>
  %key = gpuc.iota dim = 1 : tensor<4x4xi64>
  %offset = gpuc.sub %key, %query : tensor<4x4xi64>
  %above = gpuc.compare ge, %offset, %one : tensor<4x4xi64>
  %kt = gpuc.transpose %k perm = [0, 2, 3, 1] : tensor<2x4x3x8xf32> -> tensor<2x3x8x4xf32>
  %s = gpuc.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %c = gpuc.broadcast %quarter : tensor<f32> -> tensor<2x3x4x4xf32>
  %scaled = gpuc.mul %s, %c : tensor<2x3x4x4xf32>
  %wide = gpuc.broadcast %above : tensor<4x4xi1> -> tensor<2x3x4x4xi1>
  %masked = gpuc.select %wide, %ninf, %scaled : tensor<2x3x4x4xi1>, tensor<2x3x4x4xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<2x3x4x4xf32>
  %o = gpuc.matmul %p, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// The dynamo exporter's NaN guard beside a mask of indices: key > query
// excluded keeps every row's diagonal, so no row is NaN and the guard
// goes; key >= query excluded leaves the first row no key, so the chain
// stays.
// CHECK-LABEL: func.func @index_mask_nan_guard
// CHECK: gpuc.attention
// CHECK-NOT: gpuc.attention
// CHECK: gpuc.softmax
// CHECK-NOT: gpuc.softmax
func.func @index_mask_nan_guard(%q: tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) {
  %zero = gpuc.constant dense<0.000000e+00> : tensor<1x2x3x3xf32>
  %ninf = gpuc.constant dense<0xFF800000> : tensor<1x2x3x3xf32>
  %query = gpuc.iota dim = 0 : tensor<3x3xi64>
  %key = gpuc.iota dim = 1 : tensor<3x3xi64>
  %after = gpuc.compare gt, %key, %query : tensor<3x3xi64>
  %from = gpuc.compare ge, %key, %query : tensor<3x3xi64>
  %s = gpuc.matmul %q, %q transpose_rhs : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x3xf32>
  %wide = gpuc.broadcast %after : tensor<3x3xi1> -> tensor<1x2x3x3xi1>
  %masked = gpuc.select %wide, %ninf, %s : tensor<1x2x3x3xi1>, tensor<1x2x3x3xf32>
  %p = gpuc.softmax %masked axis = 3 : tensor<1x2x3x3xf32>
  %nan = gpuc.compare ne, %p, %p : tensor<1x2x3x3xf32>
  %g = gpuc.select %nan, %zero, %p : tensor<1x2x3x3xi1>, tensor<1x2x3x3xf32>
  %o = gpuc.matmul %g, %q : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %s2 = gpuc.matmul %q, %q transpose_rhs : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x3xf32>
  %wide2 = gpuc.broadcast %from : tensor<3x3xi1> -> tensor<1x2x3x3xi1>
  %masked2 = gpuc.select %wide2, %ninf, %s2 : tensor<1x2x3x3xi1>, tensor<1x2x3x3xf32>
  %p2 = gpuc.softmax %masked2 axis = 3 : tensor<1x2x3x3xf32>
  %nan2 = gpuc.compare ne, %p2, %p2 : tensor<1x2x3x3xf32>
  %g2 = gpuc.select %nan2, %zero, %p2 : tensor<1x2x3x3xi1>, tensor<1x2x3x3xf32>
  %o2 = gpuc.matmul %g2, %q : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return %o, %o2 : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>
}

// -----

// Hugging Face's Llama: grouped-query attention, `repeat_kv` (a reshape to
// [B, Hk, 1, T, D], a broadcast over the group, a reshape to the query
// heads) of the keys and the values, the keys transposed after it. The
// attention reads the 2 key heads unexpanded; the transposes cancel.
// CHECK-LABEL: func.func @grouped_query_heads
// CHECK-NOT: gpuc.transpose
// CHECK: %[[O:.+]], %{{.+}} = gpuc.attention %arg0, %arg1, %arg2 scale = 2.500000e-01 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32> -> tensor<2x6x5x4xf32>, tensor<2x6x5xf32>
// CHECK-NOT: gpuc.softmax
// CHECK: return %[[O]]
func.func @grouped_query_heads(%q: tensor<2x6x5x4xf32>, %k: tensor<2x2x5x4xf32>, %v: tensor<2x2x5x4xf32>) -> tensor<2x6x5x4xf32> {
  %c = gpuc.constant dense<2.500000e-01> : tensor<2x6x5x5xf32>
  %k1 = gpuc.reshape %k : tensor<2x2x5x4xf32> -> tensor<2x2x1x5x4xf32>
  %kg = gpuc.broadcast %k1 : tensor<2x2x1x5x4xf32> -> tensor<2x2x3x5x4xf32>
  %kgt = gpuc.transpose %kg perm = [0, 1, 2, 4, 3] : tensor<2x2x3x5x4xf32> -> tensor<2x2x3x4x5xf32>
  %kt = gpuc.reshape %kgt : tensor<2x2x3x4x5xf32> -> tensor<2x6x4x5xf32>
  %v1 = gpuc.reshape %v : tensor<2x2x5x4xf32> -> tensor<2x2x1x5x4xf32>
  %vg = gpuc.broadcast %v1 : tensor<2x2x1x5x4xf32> -> tensor<2x2x3x5x4xf32>
  %vr = gpuc.reshape %vg : tensor<2x2x3x5x4xf32> -> tensor<2x6x5x4xf32>
  %s = gpuc.matmul %q, %kt : (tensor<2x6x5x4xf32>, tensor<2x6x4x5xf32>) -> tensor<2x6x5x5xf32>
  %scaled = gpuc.mul %s, %c : tensor<2x6x5x5xf32>
  %p = gpuc.softmax %scaled axis = 3 : tensor<2x6x5x5xf32>
  %o = gpuc.matmul %p, %vr : (tensor<2x6x5x5xf32>, tensor<2x6x5x4xf32>) -> tensor<2x6x5x4xf32>
  return %o : tensor<2x6x5x4xf32>
}

// -----

// Keys repeated over a group but values not (a different head count for
// each): the attention keeps the expanded keys.
// CHECK-LABEL: func.func @grouped_keys_only
// CHECK: gpuc.attention %arg0, %{{.+}}, %arg2 scale = 2.500000e-01 fill = 0xFFF0000000000000 : tensor<2x6x5x4xf32>, tensor<2x6x5x4xf32>, tensor<2x6x5x4xf32>
func.func @grouped_keys_only(%q: tensor<2x6x5x4xf32>, %k: tensor<2x2x5x4xf32>, %v: tensor<2x6x5x4xf32>) -> tensor<2x6x5x4xf32> {
  %c = gpuc.constant dense<2.500000e-01> : tensor<2x6x5x5xf32>
  %k1 = gpuc.reshape %k : tensor<2x2x5x4xf32> -> tensor<2x2x1x5x4xf32>
  %kg = gpuc.broadcast %k1 : tensor<2x2x1x5x4xf32> -> tensor<2x2x3x5x4xf32>
  %kr = gpuc.reshape %kg : tensor<2x2x3x5x4xf32> -> tensor<2x6x5x4xf32>
  %kt = gpuc.transpose %kr perm = [0, 1, 3, 2] : tensor<2x6x5x4xf32> -> tensor<2x6x4x5xf32>
  %s = gpuc.matmul %q, %kt : (tensor<2x6x5x4xf32>, tensor<2x6x4x5xf32>) -> tensor<2x6x5x5xf32>
  %scaled = gpuc.mul %s, %c : tensor<2x6x5x5xf32>
  %p = gpuc.softmax %scaled axis = 3 : tensor<2x6x5x5xf32>
  %o = gpuc.matmul %p, %v : (tensor<2x6x5x5xf32>, tensor<2x6x5x4xf32>) -> tensor<2x6x5x4xf32>
  return %o : tensor<2x6x5x4xf32>
}
