// One causal attention three ways: its mask an operand, the flash
// lowering's triangle with no operand, and that triangle under bthd (the
// rows second).
func.func @forward(%q: tensor<1x2x5x4xf32> {gpuc.input = "q"}, %do: tensor<1x2x5x4xf32> {gpuc.input = "do"}, %qt: tensor<1x5x2x4xf32> {gpuc.input = "qt"}, %dot: tensor<1x5x2x4xf32> {gpuc.input = "dot"}) -> (tensor<1x2x5x4xf32> {gpuc.output = "o_mask"}, tensor<1x2x5x4xf32> {gpuc.output = "dq_mask"}, tensor<1x2x5x4xf32> {gpuc.output = "o_triangle"}, tensor<1x2x5x4xf32> {gpuc.output = "dq_triangle"}, tensor<1x5x2x4xf32> {gpuc.output = "o_bthd"}, tensor<1x5x2x4xf32> {gpuc.output = "dq_bthd"}) {
  %m = gpuc.constant dense<[[[[false, true, true, true, true], [false, false, true, true, true], [false, false, false, true, true], [false, false, false, false, true], [false, false, false, false, false]]]]> : tensor<1x1x5x5xi1>
  %o, %lse = gpuc.attention %q, %q, %q mask %m : tensor<1x1x5x5xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32> -> tensor<1x2x5x4xf32>, tensor<1x2x5xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %q, %q, %o, %lse, %do mask %m : tensor<1x1x5x5xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5xf32>
  %o2, %lse2 = gpuc.attention %q, %q, %q scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32> -> tensor<1x2x5x4xf32>, tensor<1x2x5xf32>
  %dq2, %dk2, %dv2 = gpuc.attention_grad %q, %q, %q, %o2, %lse2, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5xf32>
  %o3, %lse3 = gpuc.attention %qt, %qt, %qt scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle le bthd {mask_keeps} : tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32> -> tensor<1x5x2x4xf32>, tensor<1x2x5xf32>
  %dq3, %dk3, %dv3 = gpuc.attention_grad %qt, %qt, %qt, %o3, %lse3, %dot scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle le bthd {mask_keeps} : tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x2x5xf32>
  return %o, %dq, %o2, %dq2, %o3, %dq3 : tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>
}
