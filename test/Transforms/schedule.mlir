// RUN: gpuc-opt %s --split-input-file --gpuc-schedule | FileCheck %s

// Two branches of one input, each a large producer and a small consumer.
// In program order both large values are live at once (2 x 64 KiB); run
// each consumer right after its producer and only one is.
// CHECK-LABEL: func.func @branches
// CHECK-SAME: gpuc.schedule = {moved = 2 : i64, peak = 65664 : i64, peak_before = 131136 : i64}
// CHECK: %[[A:.+]] = gpuc.fusion
// CHECK-SAME: -> tensor<16384xf32>
// CHECK: gpuc.fusion(%[[A]])
// CHECK-SAME: -> tensor<16xf32>
// CHECK: %[[B:.+]] = gpuc.fusion
// CHECK-SAME: -> tensor<16384xf32>
// CHECK: gpuc.fusion(%[[B]])
func.func @branches(%x: tensor<16384xf32> {gpuc.input = "x"}) -> (tensor<16xf32> {gpuc.output = "a"}, tensor<16xf32> {gpuc.output = "b"}) {
  %a = gpuc.fusion(%x) : (tensor<16384xf32>) -> tensor<16384xf32> {
  ^bb0(%v: tensor<16384xf32>):
    %r = gpuc.exp %v : tensor<16384xf32>
    gpuc.yield %r : tensor<16384xf32>
  }
  %b = gpuc.fusion(%x) : (tensor<16384xf32>) -> tensor<16384xf32> {
  ^bb0(%v: tensor<16384xf32>):
    %r = gpuc.tanh %v : tensor<16384xf32>
    gpuc.yield %r : tensor<16384xf32>
  }
  %sa = gpuc.fusion(%a) : (tensor<16384xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16384xf32>):
    %m = gpuc.reshape %v : tensor<16384xf32> -> tensor<16x1024xf32>
    %r = gpuc.reduce_sum %m axes = [1] : tensor<16x1024xf32> -> tensor<16xf32>
    gpuc.yield %r : tensor<16xf32>
  }
  %sb = gpuc.fusion(%b) : (tensor<16384xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16384xf32>):
    %m = gpuc.reshape %v : tensor<16384xf32> -> tensor<16x1024xf32>
    %r = gpuc.reduce_sum %m axes = [1] : tensor<16x1024xf32> -> tensor<16xf32>
    gpuc.yield %r : tensor<16xf32>
  }
  return %sa, %sb : tensor<16xf32>, tensor<16xf32>
}

// -----

// A chain has one order: nothing moves, and the summary says so.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: gpuc.schedule = {moved = 0 : i64, peak = [[P:[0-9]+]] : i64, peak_before = [[P]] : i64}
func.func @chain(%x: tensor<1024xf32> {gpuc.input = "x"}) -> (tensor<1024xf32> {gpuc.output = "y"}) {
  %a = gpuc.fusion(%x) : (tensor<1024xf32>) -> tensor<1024xf32> {
  ^bb0(%v: tensor<1024xf32>):
    %r = gpuc.exp %v : tensor<1024xf32>
    gpuc.yield %r : tensor<1024xf32>
  }
  %b = gpuc.fusion(%a) : (tensor<1024xf32>) -> tensor<1024xf32> {
  ^bb0(%v: tensor<1024xf32>):
    %r = gpuc.tanh %v : tensor<1024xf32>
    gpuc.yield %r : tensor<1024xf32>
  }
  return %b : tensor<1024xf32>
}
