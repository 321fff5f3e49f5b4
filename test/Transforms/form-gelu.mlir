// RUN: gpuc-opt %s --gpuc-form-gelu -split-input-file | FileCheck %s

// nn.GELU() below opset 20: (x * (1 + erf(x / sqrt(2)))) * 0.5, its constants
// broadcast from scalars.
// CHECK-LABEL: func.func @erf_export
// CHECK-NEXT: %[[G:.+]] = gpuc.gelu %arg0 : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @erf_export(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sqrt2 = gpuc.constant dense<1.41421354> : tensor<f32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<4x8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<4x8xf32>
  %sqrt2b = gpuc.broadcast %sqrt2 : tensor<f32> -> tensor<4x8xf32>
  %u = gpuc.div %x, %sqrt2b : tensor<4x8xf32>
  %e = gpuc.erf %u : tensor<4x8xf32>
  %a = gpuc.add %e, %one : tensor<4x8xf32>
  %m = gpuc.mul %x, %a : tensor<4x8xf32>
  %y = gpuc.mul %m, %half : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// 0.5 * x first, x times 1/sqrt(2), 1 + erf: the same function.
// CHECK-LABEL: func.func @half_x_first
// CHECK-NEXT: %[[G:.+]] = gpuc.gelu %arg0 : tensor<8xf32>
// CHECK-NEXT: return %[[G]]
func.func @half_x_first(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c = gpuc.constant dense<0.707106769> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<8xf32>
  %hx = gpuc.mul %half, %x : tensor<8xf32>
  %u = gpuc.mul %c, %x : tensor<8xf32>
  %e = gpuc.erf %u : tensor<8xf32>
  %a = gpuc.add %one, %e : tensor<8xf32>
  %y = gpuc.mul %a, %hx : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// (1 + erf) / 2, then times x.
// CHECK-LABEL: func.func @halved_sum_first
// CHECK-NEXT: %[[G:.+]] = gpuc.gelu %arg0 : tensor<8xf32>
// CHECK-NEXT: return %[[G]]
func.func @halved_sum_first(%x: tensor<8xf32>) -> tensor<8xf32> {
  %sqrt2 = gpuc.constant dense<1.41421354> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %two = gpuc.constant dense<2.000000e+00> : tensor<8xf32>
  %u = gpuc.div %x, %sqrt2 : tensor<8xf32>
  %e = gpuc.erf %u : tensor<8xf32>
  %a = gpuc.add %e, %one : tensor<8xf32>
  %h = gpuc.div %a, %two : tensor<8xf32>
  %y = gpuc.mul %x, %h : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// PyTorch's dynamo exporter: 0.5 * (1 + erf(x / sqrt(2))), then x times
// that; the product with 0.5 is read as a halving, not as a factor of x.
// CHECK-LABEL: func.func @half_times_sum
// CHECK-NEXT: %[[G:.+]] = gpuc.gelu %arg0 : tensor<8xf32>
// CHECK-NEXT: return %[[G]]
func.func @half_times_sum(%x: tensor<8xf32>) -> tensor<8xf32> {
  %sqrt2 = gpuc.constant dense<1.41421354> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<8xf32>
  %u = gpuc.div %x, %sqrt2 : tensor<8xf32>
  %e = gpuc.erf %u : tensor<8xf32>
  %a = gpuc.add %e, %one : tensor<8xf32>
  %h = gpuc.mul %half, %a : tensor<8xf32>
  %y = gpuc.mul %x, %h : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
// the cube a pow.
// CHECK-LABEL: func.func @tanh_pow
// CHECK-NEXT: %[[G:.+]] = gpuc.gelu %arg0 tanh : tensor<8xf32>
// CHECK-NEXT: return %[[G]]
func.func @tanh_pow(%x: tensor<8xf32>) -> tensor<8xf32> {
  %three = gpuc.constant dense<3.000000e+00> : tensor<8xf32>
  %w = gpuc.constant dense<4.471500e-02> : tensor<8xf32>
  %k = gpuc.constant dense<0.797884583> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<8xf32>
  %hx = gpuc.mul %half, %x : tensor<8xf32>
  %cube = gpuc.pow %x, %three : tensor<8xf32>
  %wc = gpuc.mul %w, %cube : tensor<8xf32>
  %in = gpuc.add %x, %wc : tensor<8xf32>
  %s = gpuc.mul %k, %in : tensor<8xf32>
  %t = gpuc.tanh %s : tensor<8xf32>
  %a = gpuc.add %one, %t : tensor<8xf32>
  %y = gpuc.mul %hx, %a : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// The tanh approximation with the cube as two products.
// CHECK-LABEL: func.func @tanh_products
// CHECK-NEXT: %[[G:.+]] = gpuc.gelu %arg0 tanh : tensor<8xf32>
// CHECK-NEXT: return %[[G]]
func.func @tanh_products(%x: tensor<8xf32>) -> tensor<8xf32> {
  %w = gpuc.constant dense<4.471500e-02> : tensor<8xf32>
  %k = gpuc.constant dense<0.797884583> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<8xf32>
  %sq = gpuc.mul %x, %x : tensor<8xf32>
  %cube = gpuc.mul %sq, %x : tensor<8xf32>
  %wc = gpuc.mul %cube, %w : tensor<8xf32>
  %in = gpuc.add %wc, %x : tensor<8xf32>
  %s = gpuc.mul %in, %k : tensor<8xf32>
  %t = gpuc.tanh %s : tensor<8xf32>
  %a = gpuc.add %t, %one : tensor<8xf32>
  %m = gpuc.mul %x, %a : tensor<8xf32>
  %y = gpuc.mul %m, %half : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Another reader of erf's result keeps the chain as it is.
// CHECK-LABEL: func.func @erf_read_elsewhere
// CHECK-NOT: gpuc.gelu
// CHECK: gpuc.erf
func.func @erf_read_elsewhere(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %sqrt2 = gpuc.constant dense<1.41421354> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<8xf32>
  %u = gpuc.div %x, %sqrt2 : tensor<8xf32>
  %e = gpuc.erf %u : tensor<8xf32>
  %a = gpuc.add %e, %one : tensor<8xf32>
  %m = gpuc.mul %x, %a : tensor<8xf32>
  %y = gpuc.mul %m, %half : tensor<8xf32>
  return %y, %e : tensor<8xf32>, tensor<8xf32>
}

// -----

// Not GELU: erf(x / 2), and 0.5 times erf(x / sqrt(2)) times another value.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: gpuc.gelu
// CHECK: return
func.func @not_gelu(%x: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %two = gpuc.constant dense<2.000000e+00> : tensor<8xf32>
  %sqrt2 = gpuc.constant dense<1.41421354> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<8xf32>
  %u = gpuc.div %x, %two : tensor<8xf32>
  %e = gpuc.erf %u : tensor<8xf32>
  %a = gpuc.add %e, %one : tensor<8xf32>
  %m = gpuc.mul %x, %a : tensor<8xf32>
  %y = gpuc.mul %m, %half : tensor<8xf32>
  %u2 = gpuc.div %x, %sqrt2 : tensor<8xf32>
  %e2 = gpuc.erf %u2 : tensor<8xf32>
  %a2 = gpuc.add %e2, %one : tensor<8xf32>
  %m2 = gpuc.mul %z, %a2 : tensor<8xf32>
  %y2 = gpuc.mul %m2, %half : tensor<8xf32>
  return %y, %y2 : tensor<8xf32>, tensor<8xf32>
}

// -----

// A tanh approximation with another weight of the cube is not GELU's.
// CHECK-LABEL: func.func @tanh_other_weight
// CHECK-NOT: gpuc.gelu
// CHECK: gpuc.tanh
func.func @tanh_other_weight(%x: tensor<8xf32>) -> tensor<8xf32> {
  %three = gpuc.constant dense<3.000000e+00> : tensor<8xf32>
  %w = gpuc.constant dense<5.000000e-02> : tensor<8xf32>
  %k = gpuc.constant dense<0.797884583> : tensor<8xf32>
  %one = gpuc.constant dense<1.000000e+00> : tensor<8xf32>
  %half = gpuc.constant dense<5.000000e-01> : tensor<8xf32>
  %hx = gpuc.mul %half, %x : tensor<8xf32>
  %cube = gpuc.pow %x, %three : tensor<8xf32>
  %wc = gpuc.mul %w, %cube : tensor<8xf32>
  %in = gpuc.add %x, %wc : tensor<8xf32>
  %s = gpuc.mul %k, %in : tensor<8xf32>
  %t = gpuc.tanh %s : tensor<8xf32>
  %a = gpuc.add %one, %t : tensor<8xf32>
  %y = gpuc.mul %hx, %a : tensor<8xf32>
  return %y : tensor<8xf32>
}
