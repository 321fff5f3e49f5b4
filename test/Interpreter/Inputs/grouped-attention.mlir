// One causal grouped-query attention two ways: 4 query heads reading 2 key
// and value heads, and the same with the keys and values repeated for
// each query head (as Hugging Face's `repeat_kv` does), whose gradients
// are then summed over each group; and the grouped one under bthd.
func.func @forward(%q: tensor<1x4x5x4xf32> {gpuc.input = "q"}, %k: tensor<1x2x5x4xf32> {gpuc.input = "k"}, %v: tensor<1x2x5x4xf32> {gpuc.input = "v"}, %do: tensor<1x4x5x4xf32> {gpuc.input = "do"}, %qt: tensor<1x5x4x4xf32> {gpuc.input = "qt"}, %kt: tensor<1x5x2x4xf32> {gpuc.input = "kt"}, %vt: tensor<1x5x2x4xf32> {gpuc.input = "vt"}, %dot: tensor<1x5x4x4xf32> {gpuc.input = "dot"}) -> (tensor<1x4x5x4xf32> {gpuc.output = "o_grouped"}, tensor<1x4x5x4xf32> {gpuc.output = "dq_grouped"}, tensor<1x2x5x4xf32> {gpuc.output = "dk_grouped"}, tensor<1x2x5x4xf32> {gpuc.output = "dv_grouped"}, tensor<1x4x5x4xf32> {gpuc.output = "o_repeated"}, tensor<1x4x5x4xf32> {gpuc.output = "dq_repeated"}, tensor<1x2x5x4xf32> {gpuc.output = "dk_repeated"}, tensor<1x2x5x4xf32> {gpuc.output = "dv_repeated"}, tensor<1x5x4x4xf32> {gpuc.output = "o_bthd"}, tensor<1x5x2x4xf32> {gpuc.output = "dk_bthd"}) {
  %o, %lse = gpuc.attention %q, %k, %v scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x4x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32> -> tensor<1x4x5x4xf32>, tensor<1x4x5xf32>
  %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x4x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x4x5xf32>
  %k1 = gpuc.reshape %k : tensor<1x2x5x4xf32> -> tensor<1x2x1x5x4xf32>
  %kg = gpuc.broadcast %k1 : tensor<1x2x1x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %kr = gpuc.reshape %kg : tensor<1x2x2x5x4xf32> -> tensor<1x4x5x4xf32>
  %v1 = gpuc.reshape %v : tensor<1x2x5x4xf32> -> tensor<1x2x1x5x4xf32>
  %vg = gpuc.broadcast %v1 : tensor<1x2x1x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %vr = gpuc.reshape %vg : tensor<1x2x2x5x4xf32> -> tensor<1x4x5x4xf32>
  %o2, %lse2 = gpuc.attention %q, %kr, %vr scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32> -> tensor<1x4x5x4xf32>, tensor<1x4x5xf32>
  %dq2, %dk2, %dv2 = gpuc.attention_grad %q, %kr, %vr, %o2, %lse2, %do scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt : tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x4x5xf32>
  %dkg = gpuc.reshape %dk2 : tensor<1x4x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %dks = gpuc.reduce_sum %dkg axes = [2] : tensor<1x2x2x5x4xf32> -> tensor<1x2x5x4xf32>
  %dvg = gpuc.reshape %dv2 : tensor<1x4x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %dvs = gpuc.reduce_sum %dvg axes = [2] : tensor<1x2x2x5x4xf32> -> tensor<1x2x5x4xf32>
  %o3, %lse3 = gpuc.attention %qt, %kt, %vt scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt bthd : tensor<1x5x4x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32> -> tensor<1x5x4x4xf32>, tensor<1x4x5xf32>
  %dq3, %dk3, %dv3 = gpuc.attention_grad %qt, %kt, %vt, %o3, %lse3, %dot scale = 5.000000e-01 fill = 0xFFF0000000000000 triangle gt bthd : tensor<1x5x4x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x4x4xf32>, tensor<1x4x5xf32>
  return %o, %dq, %dk, %dv, %o2, %dq2, %dks, %dvs, %o3, %dk3 : tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x5x4x4xf32>, tensor<1x5x2x4xf32>
}
