// REQUIRES: cbc
// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-remat="budget=2600 solver=milp" | FileCheck %s
// RUN: gpuc-opt %s --gpuc-form-kernels --gpuc-remat="budget=2600 solver=greedy" | FileCheck %s --check-prefix=GREEDY
// RUN: not gpuc-opt %s --gpuc-form-kernels --gpuc-remat="budget=1000 solver=milp" 2>&1 | FileCheck %s --check-prefix=UNREACHABLE
// RUN: not gpuc-opt %s --gpuc-form-kernels --gpuc-remat="budget=2600 solver=cplex" 2>&1 | FileCheck %s --check-prefix=SOLVER

// Four GEMM results a, b, c, d (512, 1024, 512 and 1280 bytes; 1280,
// 20480, 5120 and 1280 FLOPs) are kept for backward, which reads them in
// reverse order: the peak is 3584 bytes. At a budget of 2600, recomputing
// b alone reaches it (2560), and so does recomputing a and c together.
// The greedy solver takes the cheapest single recomputation that reaches
// the budget, b (20480 FLOPs); the exact one finds a and c (6400).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: gpuc.remat = {budget = 2600 : i64, extra_flops = 6400 : i64, merged = 0 : i64, optimal = true, peak = 2560 : i64, peak_before = 3584 : i64, recomputed = 2 : i64, solver = "milp"}
// CHECK-COUNT-4: gpuc.matmul %arg{{[0-9]}}, %arg{{[0-9]}} :
// CHECK: gpuc.reduce_max
// CHECK: gpuc.matmul %arg4, %arg5 {gpuc.recompute}
// CHECK: gpuc.reduce_max
// CHECK: gpuc.reduce_max
// CHECK: gpuc.matmul %arg0, %arg1 {gpuc.recompute}
// CHECK: gpuc.reduce_max
// CHECK-NOT: gpuc.recompute

// GREEDY-LABEL: func.func @train_step
// GREEDY-SAME: gpuc.remat = {budget = 2600 : i64, extra_flops = 20480 : i64, merged = 0 : i64, peak = 2560 : i64, peak_before = 3584 : i64, recomputed = 1 : i64, solver = "greedy"}
// GREEDY: gpuc.matmul %arg2, %arg3 {gpuc.recompute}
// GREEDY-NOT: gpuc.recompute

// Below what any set of recomputations reaches, the error states the
// lowest peak the exact solver found.
// UNREACHABLE: error: the memory budget of 1000 bytes (0.00 MiB) cannot be met: recomputing forward values lowers the arena's peak from 3584 to 1536 bytes (0.00 MiB) at best

// SOLVER: error: gpuc-remat: unknown solver 'cplex' (greedy or milp)
func.func @train_step(%xa: tensor<8x5xf32> {gpuc.input = "xa"}, %wa: tensor<5x16xf32> {gpuc.input = "wa"},
                      %xb: tensor<8x40xf32> {gpuc.input = "xb"}, %wb: tensor<40x32xf32> {gpuc.input = "wb"},
                      %xc: tensor<8x20xf32> {gpuc.input = "xc"}, %wc: tensor<20x16xf32> {gpuc.input = "wc"},
                      %xd: tensor<8x4xf32> {gpuc.input = "xd"}, %wd: tensor<4x40xf32> {gpuc.input = "wd"})
    -> (tensor<f32> {gpuc.output = "loss"}, tensor<f32> {gpuc.output = "ra"}, tensor<f32> {gpuc.output = "rb"},
        tensor<f32> {gpuc.output = "rc"}, tensor<f32> {gpuc.output = "rd"}) {
  %a = gpuc.matmul %xa, %wa : (tensor<8x5xf32>, tensor<5x16xf32>) -> tensor<8x16xf32>
  %sa = gpuc.reduce_sum %a axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %b = gpuc.matmul %xb, %wb : (tensor<8x40xf32>, tensor<40x32xf32>) -> tensor<8x32xf32>
  %sb = gpuc.reduce_sum %b axes = [0, 1] : tensor<8x32xf32> -> tensor<f32>
  %c = gpuc.matmul %xc, %wc : (tensor<8x20xf32>, tensor<20x16xf32>) -> tensor<8x16xf32>
  %sc = gpuc.reduce_sum %c axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %d = gpuc.matmul %xd, %wd : (tensor<8x4xf32>, tensor<4x40xf32>) -> tensor<8x40xf32>
  %sd = gpuc.reduce_sum %d axes = [0, 1] : tensor<8x40xf32> -> tensor<f32>
  %l1 = gpuc.add %sa, %sb : tensor<f32>
  %l2 = gpuc.add %sc, %sd : tensor<f32>
  %l = gpuc.add %l1, %l2 : tensor<f32>
  %rd = gpuc.reduce_max %d axes = [0, 1] : tensor<8x40xf32> -> tensor<f32>
  %rc = gpuc.reduce_max %c axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %rb = gpuc.reduce_max %b axes = [0, 1] : tensor<8x32xf32> -> tensor<f32>
  %ra = gpuc.reduce_max %a axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l, %ra, %rb, %rc, %rd : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}
