// RUN: gpuc-opt %s --split-input-file --gpuc-recompute-reads | FileCheck %s

// Batch norm's backward after a ReLU, in small: the mask reads the ReLU's
// output r, which is relu(y * s + b) with y read by the reader anyway and s,
// b per-channel values. The reader computes r, loading s and b instead; the
// producer still stores r, which the function returns.
// CHECK-LABEL: func.func @mask_from_read_input
// CHECK: %[[R:.+]] = gpuc.fusion(%arg0, %arg1, %arg2)
// CHECK: gpuc.relu
// CHECK: gpuc.yield
// CHECK: gpuc.fusion(%arg3, %arg0, %arg2, %arg1) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
// CHECK: ^bb0(%[[DY:[^:]+]]: tensor<8x4xf32>, %[[Y:[^:]+]]: tensor<8x4xf32>, %[[B:[^:]+]]: tensor<4xf32>, %[[S:[^:]+]]: tensor<4xf32>):
// CHECK-DAG: gpuc.broadcast %[[S]]
// CHECK-DAG: gpuc.broadcast %[[B]]
// CHECK: %[[RR:.+]] = gpuc.relu
// CHECK: gpuc.compare gt, %[[RR]]
// CHECK: return %[[R]]
func.func @mask_from_read_input(%y: tensor<8x4xf32> {gpuc.input = "y"}, %s: tensor<4xf32> {gpuc.input = "s"}, %b: tensor<4xf32> {gpuc.input = "b"}, %dy: tensor<8x4xf32> {gpuc.input = "dy"}) -> (tensor<8x4xf32> {gpuc.output = "r"}, tensor<8x4xf32> {gpuc.output = "dx"}) {
  %r = gpuc.fusion(%y, %s, %b) : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vy: tensor<8x4xf32>, %vs: tensor<4xf32>, %vb: tensor<4xf32>):
    %bs = gpuc.broadcast %vs : tensor<4xf32> -> tensor<8x4xf32>
    %bb = gpuc.broadcast %vb : tensor<4xf32> -> tensor<8x4xf32>
    %m = gpuc.mul %vy, %bs : tensor<8x4xf32>
    %a = gpuc.add %m, %bb : tensor<8x4xf32>
    %o = gpuc.relu %a : tensor<8x4xf32>
    gpuc.yield %o : tensor<8x4xf32>
  }
  %dx = gpuc.fusion(%dy, %r, %y) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vdy: tensor<8x4xf32>, %vr: tensor<8x4xf32>, %vy: tensor<8x4xf32>):
    %zero = gpuc.constant dense<0.0> : tensor<8x4xf32>
    %pos = gpuc.compare gt, %vr, %zero : tensor<8x4xf32>
    %g = gpuc.select %pos, %vdy, %zero : tensor<8x4xi1>, tensor<8x4xf32>
    %t = gpuc.mul %g, %vy : tensor<8x4xf32>
    gpuc.yield %t : tensor<8x4xf32>
  }
  return %r, %dx : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// The producer's other result is a leaf: r = relu(a) where the reader loads
// a already, so r costs the reader no new input at all.
// CHECK-LABEL: func.func @leaf_is_another_result
// CHECK: %[[P:.+]]:2 = gpuc.fusion(%arg0, %arg1)
// CHECK: gpuc.fusion(%arg2, %[[P]]#0) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK: gpuc.relu
// CHECK: return
func.func @leaf_is_another_result(%y: tensor<8x4xf32> {gpuc.input = "y"}, %b: tensor<4xf32> {gpuc.input = "b"}, %dy: tensor<8x4xf32> {gpuc.input = "dy"}) -> (tensor<8x4xf32> {gpuc.output = "a"}, tensor<8x4xf32> {gpuc.output = "r"}, tensor<8x4xf32> {gpuc.output = "dx"}) {
  %p:2 = gpuc.fusion(%y, %b) : (tensor<8x4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  ^bb0(%vy: tensor<8x4xf32>, %vb: tensor<4xf32>):
    %bb = gpuc.broadcast %vb : tensor<4xf32> -> tensor<8x4xf32>
    %a = gpuc.add %vy, %bb : tensor<8x4xf32>
    %o = gpuc.relu %a : tensor<8x4xf32>
    gpuc.yield %a, %o : tensor<8x4xf32>, tensor<8x4xf32>
  }
  %dx = gpuc.fusion(%dy, %p#1, %p#0) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vdy: tensor<8x4xf32>, %vr: tensor<8x4xf32>, %va: tensor<8x4xf32>):
    %zero = gpuc.constant dense<0.0> : tensor<8x4xf32>
    %pos = gpuc.compare gt, %vr, %zero : tensor<8x4xf32>
    %g = gpuc.select %pos, %vdy, %zero : tensor<8x4xi1>, tensor<8x4xf32>
    %t = gpuc.mul %g, %va : tensor<8x4xf32>
    gpuc.yield %t : tensor<8x4xf32>
  }
  return %p#0, %p#1, %dx : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Where the reader was the only one to read r, the producer stores it no
// more: its other result stays, r and the ops only r needed go.
// CHECK-LABEL: func.func @dead_result_dropped
// CHECK: %[[Q:.+]] = gpuc.fusion(%arg0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NOT: gpuc.relu
// CHECK: gpuc.yield
// CHECK: gpuc.fusion(%arg2, %arg0, %arg1)
// CHECK: gpuc.relu
// CHECK: return %[[Q]]
func.func @dead_result_dropped(%y: tensor<8x4xf32> {gpuc.input = "y"}, %b: tensor<4xf32> {gpuc.input = "b"}, %dy: tensor<8x4xf32> {gpuc.input = "dy"}) -> (tensor<8x4xf32> {gpuc.output = "q"}, tensor<8x4xf32> {gpuc.output = "dx"}) {
  %p:2 = gpuc.fusion(%y, %b) : (tensor<8x4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  ^bb0(%vy: tensor<8x4xf32>, %vb: tensor<4xf32>):
    %e = gpuc.exp %vy : tensor<8x4xf32>
    %bb = gpuc.broadcast %vb : tensor<4xf32> -> tensor<8x4xf32>
    %a = gpuc.add %vy, %bb : tensor<8x4xf32>
    %o = gpuc.relu %a : tensor<8x4xf32>
    gpuc.yield %e, %o : tensor<8x4xf32>, tensor<8x4xf32>
  }
  %dx = gpuc.fusion(%dy, %p#1, %y) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vdy: tensor<8x4xf32>, %vr: tensor<8x4xf32>, %vy: tensor<8x4xf32>):
    %t = gpuc.mul %vdy, %vr : tensor<8x4xf32>
    %u = gpuc.add %t, %vy : tensor<8x4xf32>
    gpuc.yield %u : tensor<8x4xf32>
  }
  return %p#0, %dx : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// The reader does not load y: computing r would load y in place of r,
// no fewer bytes. It stays as it is.
// CHECK-LABEL: func.func @reader_lacks_input
// CHECK: %[[R:.+]] = gpuc.fusion(%arg0, %arg1)
// CHECK: gpuc.fusion(%arg2, %[[R]]) : (tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK-NOT: gpuc.relu
// CHECK: return
func.func @reader_lacks_input(%y: tensor<8x4xf32> {gpuc.input = "y"}, %b: tensor<4xf32> {gpuc.input = "b"}, %dy: tensor<8x4xf32> {gpuc.input = "dy"}) -> (tensor<8x4xf32> {gpuc.output = "r"}, tensor<8x4xf32> {gpuc.output = "dx"}) {
  %r = gpuc.fusion(%y, %b) : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vy: tensor<8x4xf32>, %vb: tensor<4xf32>):
    %bb = gpuc.broadcast %vb : tensor<4xf32> -> tensor<8x4xf32>
    %a = gpuc.add %vy, %bb : tensor<8x4xf32>
    %o = gpuc.relu %a : tensor<8x4xf32>
    gpuc.yield %o : tensor<8x4xf32>
  }
  %dx = gpuc.fusion(%dy, %r) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vdy: tensor<8x4xf32>, %vr: tensor<8x4xf32>):
    %t = gpuc.mul %vdy, %vr : tensor<8x4xf32>
    gpuc.yield %t : tensor<8x4xf32>
  }
  return %r, %dx : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// An exponential costs more than the load it would save.
// CHECK-LABEL: func.func @costly_op
// CHECK: %[[R:.+]] = gpuc.fusion(%arg0)
// CHECK: gpuc.fusion(%arg1, %[[R]], %arg0)
// CHECK-NOT: gpuc.exp
// CHECK: return
func.func @costly_op(%y: tensor<8x4xf32> {gpuc.input = "y"}, %dy: tensor<8x4xf32> {gpuc.input = "dy"}) -> (tensor<8x4xf32> {gpuc.output = "r"}, tensor<8x4xf32> {gpuc.output = "dx"}) {
  %r = gpuc.fusion(%y) : (tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vy: tensor<8x4xf32>):
    %o = gpuc.exp %vy : tensor<8x4xf32>
    gpuc.yield %o : tensor<8x4xf32>
  }
  %dx = gpuc.fusion(%dy, %r, %y) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vdy: tensor<8x4xf32>, %vr: tensor<8x4xf32>, %vy: tensor<8x4xf32>):
    %t = gpuc.mul %vdy, %vr : tensor<8x4xf32>
    %u = gpuc.add %t, %vy : tensor<8x4xf32>
    gpuc.yield %u : tensor<8x4xf32>
  }
  return %r, %dx : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// The per-channel value is computed inside the producer, a mean it does not
// store: the reader would have to reduce the rows again.
// CHECK-LABEL: func.func @unstored_statistic
// CHECK: %[[R:.+]] = gpuc.fusion(%arg0)
// CHECK: gpuc.fusion(%arg1, %[[R]], %arg0)
// CHECK-NOT: gpuc.reduce_mean
// CHECK: return
func.func @unstored_statistic(%y: tensor<8x4xf32> {gpuc.input = "y"}, %dy: tensor<8x4xf32> {gpuc.input = "dy"}) -> (tensor<8x4xf32> {gpuc.output = "r"}, tensor<8x4xf32> {gpuc.output = "dx"}) {
  %r = gpuc.fusion(%y) : (tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vy: tensor<8x4xf32>):
    %mean = gpuc.reduce_mean %vy axes = [0] : tensor<8x4xf32> -> tensor<4xf32>
    %bm = gpuc.broadcast %mean : tensor<4xf32> -> tensor<8x4xf32>
    %c = gpuc.sub %vy, %bm : tensor<8x4xf32>
    %o = gpuc.relu %c : tensor<8x4xf32>
    gpuc.yield %o : tensor<8x4xf32>
  }
  %dx = gpuc.fusion(%dy, %r, %y) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vdy: tensor<8x4xf32>, %vr: tensor<8x4xf32>, %vy: tensor<8x4xf32>):
    %t = gpuc.mul %vdy, %vr : tensor<8x4xf32>
    %u = gpuc.add %t, %vy : tensor<8x4xf32>
    gpuc.yield %u : tensor<8x4xf32>
  }
  return %r, %dx : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// A broadcast of a computed value would compute it once per element.
// CHECK-LABEL: func.func @broadcast_of_computed
// CHECK: %[[R:.+]] = gpuc.fusion(%arg0, %arg1)
// CHECK: gpuc.fusion(%arg2, %[[R]], %arg0)
// CHECK: return
func.func @broadcast_of_computed(%y: tensor<8x4xf32> {gpuc.input = "y"}, %s: tensor<4xf32> {gpuc.input = "s"}, %dy: tensor<8x4xf32> {gpuc.input = "dy"}) -> (tensor<8x4xf32> {gpuc.output = "r"}, tensor<8x4xf32> {gpuc.output = "dx"}) {
  %r = gpuc.fusion(%y, %s) : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vy: tensor<8x4xf32>, %vs: tensor<4xf32>):
    %sq = gpuc.mul %vs, %vs : tensor<4xf32>
    %bs = gpuc.broadcast %sq : tensor<4xf32> -> tensor<8x4xf32>
    %a = gpuc.add %vy, %bs : tensor<8x4xf32>
    %o = gpuc.relu %a : tensor<8x4xf32>
    gpuc.yield %o : tensor<8x4xf32>
  }
  %dx = gpuc.fusion(%dy, %r, %y) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vdy: tensor<8x4xf32>, %vr: tensor<8x4xf32>, %vy: tensor<8x4xf32>):
    %t = gpuc.mul %vdy, %vr : tensor<8x4xf32>
    %u = gpuc.add %t, %vy : tensor<8x4xf32>
    gpuc.yield %u : tensor<8x4xf32>
  }
  return %r, %dx : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// The reader sums r over its rows, not element by element: the computation
// would sit under a reduction of another shape. It stays a load.
// CHECK-LABEL: func.func @read_through_reduction
// CHECK: %[[R:.+]] = gpuc.fusion(%arg0, %arg1)
// CHECK: gpuc.fusion(%[[R]], %arg0)
// CHECK: return
func.func @read_through_reduction(%y: tensor<8x4xf32> {gpuc.input = "y"}, %b: tensor<4xf32> {gpuc.input = "b"}) -> (tensor<8x4xf32> {gpuc.output = "r"}, tensor<4xf32> {gpuc.output = "sum"}, tensor<8x4xf32> {gpuc.output = "z"}) {
  %r = gpuc.fusion(%y, %b) : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
  ^bb0(%vy: tensor<8x4xf32>, %vb: tensor<4xf32>):
    %bb = gpuc.broadcast %vb : tensor<4xf32> -> tensor<8x4xf32>
    %a = gpuc.add %vy, %bb : tensor<8x4xf32>
    %o = gpuc.relu %a : tensor<8x4xf32>
    gpuc.yield %o : tensor<8x4xf32>
  }
  %out:2 = gpuc.fusion(%r, %y) : (tensor<8x4xf32>, tensor<8x4xf32>) -> (tensor<4xf32>, tensor<8x4xf32>) {
  ^bb0(%vr: tensor<8x4xf32>, %vy: tensor<8x4xf32>):
    %sum = gpuc.reduce_sum %vr axes = [0] : tensor<8x4xf32> -> tensor<4xf32>
    %z = gpuc.mul %vy, %vy : tensor<8x4xf32>
    gpuc.yield %sum, %z : tensor<4xf32>, tensor<8x4xf32>
  }
  return %r, %out#0, %out#1 : tensor<8x4xf32>, tensor<4xf32>, tensor<8x4xf32>
}
