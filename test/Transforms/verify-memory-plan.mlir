// RUN: gpuc-opt %s --gpuc-verify-memory-plan -split-input-file -verify-diagnostics

// Two buffers live at once in the same bytes.
func.func @overlap(%x: tensor<16xf32> {gpuc.input = "x"}) -> (tensor<16xf32> {gpuc.output = "y"}) attributes {gpuc.memory = {arena_peak = 64 : i64}} {
  // expected-note @+1 {{the other buffer is defined here}}
  %a = gpuc.fusion(%x) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>):
    %e = gpuc.exp %v : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  // expected-error @+1 {{result #0 shares bytes [0, 64) of the arena with a buffer that is still live}}
  %b = gpuc.fusion(%a) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>):
    %e = gpuc.tanh %v : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  %c = gpuc.fusion(%a, %b) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>, %w: tensor<16xf32>):
    %e = gpuc.add %v, %w : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  return %c : tensor<16xf32>
}

// -----

func.func @size(%x: tensor<16xf32> {gpuc.input = "x"}) -> (tensor<16xf32> {gpuc.output = "y"}) attributes {gpuc.memory = {arena_peak = 64 : i64}} {
  // expected-error @+1 {{result #0 holds 64 bytes but its slot 32}}
  %a = gpuc.fusion(%x) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 32>]} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>):
    %e = gpuc.exp %v : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  return %a : tensor<16xf32>
}

// -----

func.func @past_peak(%x: tensor<16xf32> {gpuc.input = "x"}) -> (tensor<16xf32> {gpuc.output = "y"}) attributes {gpuc.memory = {arena_peak = 64 : i64}} {
  // expected-error @+1 {{result #0's slot ends at byte 128, past the arena's peak of 64}}
  %a = gpuc.fusion(%x) {gpuc.slots = [#gpuc.slot<offset = 64, bytes = 64>]} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>):
    %e = gpuc.exp %v : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  return %a : tensor<16xf32>
}

// -----

func.func @no_slot(%x: tensor<4x4xf32> {gpuc.input = "x"}) -> (tensor<4x4xf32> {gpuc.output = "y"}) attributes {gpuc.memory = {arena_peak = 64 : i64}} {
  // expected-error @+1 {{needs one #gpuc.slot per result in 'gpuc.slots' (run gpuc-plan-memory)}}
  %h = gpuc.matmul %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %h : tensor<4x4xf32>
}

// -----

// A transpose reads other indices than it writes.
func.func @transpose_in_place(%x: tensor<4x4xf32> {gpuc.input = "x"}) -> (tensor<4x4xf32> {gpuc.output = "y"}) attributes {gpuc.memory = {arena_peak = 64 : i64}} {
  %a = gpuc.fusion(%x) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]} : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%v: tensor<4x4xf32>):
    %e = gpuc.exp %v : tensor<4x4xf32>
    gpuc.yield %e : tensor<4x4xf32>
  }
  // expected-error @+1 {{result #0 cannot overwrite operand #0: the kernel must be elementwise and read the operand only where it writes the result, at the same size}}
  %t = gpuc.fusion(%a) {gpuc.in_place = array<i64: 0>, gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]} : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%v: tensor<4x4xf32>):
    %e = gpuc.transpose %v perm = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    gpuc.yield %e : tensor<4x4xf32>
  }
  return %t : tensor<4x4xf32>
}

// -----

// The operand is read after the kernel that overwrites it.
func.func @read_later(%x: tensor<16xf32> {gpuc.input = "x"}) -> (tensor<16xf32> {gpuc.output = "y"}) attributes {gpuc.memory = {arena_peak = 128 : i64}} {
  %a = gpuc.fusion(%x) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>):
    %e = gpuc.exp %v : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  // expected-error @+1 {{result #0 overwrites operand #0, which is read later in the step}}
  %b = gpuc.fusion(%a) {gpuc.in_place = array<i64: 0>, gpuc.slots = [#gpuc.slot<offset = 0, bytes = 64>]} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>):
    %e = gpuc.tanh %v : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  %c = gpuc.fusion(%a, %b) {gpuc.slots = [#gpuc.slot<offset = 64, bytes = 64>]} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%v: tensor<16xf32>, %w: tensor<16xf32>):
    %e = gpuc.add %v, %w : tensor<16xf32>
    gpuc.yield %e : tensor<16xf32>
  }
  return %c : tensor<16xf32>
}

// -----

// The parameter's old value is read after its update was written over it.
gpuc.parameter @w trainable : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @param_read_later(%w: tensor<8xf32> {gpuc.param = @w}, %g: tensor<8xf32> {gpuc.input = "g"}) -> (tensor<8xf32> {gpuc.update = @w}, tensor<8xf32> {gpuc.output = "y"}) attributes {gpuc.memory = {arena_peak = 64 : i64}} {
  // expected-error @+1 {{result #0 overwrites @w, which is read later in the step}}
  %n = gpuc.fusion(%w, %g) {gpuc.in_place = array<i64: 0>, gpuc.slots = [#gpuc.slot<bytes = 32, param = @w>]} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%v: tensor<8xf32>, %d: tensor<8xf32>):
    %e = gpuc.sub %v, %d : tensor<8xf32>
    gpuc.yield %e : tensor<8xf32>
  }
  %m = gpuc.fusion(%w) {gpuc.slots = [#gpuc.slot<offset = 0, bytes = 32>]} : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%v: tensor<8xf32>):
    %e = gpuc.mul %v, %v : tensor<8xf32>
    gpuc.yield %e : tensor<8xf32>
  }
  return %n, %m : tensor<8xf32>, tensor<8xf32>
}

// -----

gpuc.parameter @w trainable : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @param_without_in_place(%w: tensor<8xf32> {gpuc.param = @w}, %g: tensor<8xf32> {gpuc.input = "g"}) -> (tensor<8xf32> {gpuc.update = @w}) attributes {gpuc.memory = {arena_peak = 0 : i64}} {
  // expected-error @+1 {{result #0 is written into @w but overwrites no operand ('gpuc.in_place')}}
  %n = gpuc.fusion(%w, %g) {gpuc.slots = [#gpuc.slot<bytes = 32, param = @w>]} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%v: tensor<8xf32>, %d: tensor<8xf32>):
    %e = gpuc.sub %v, %d : tensor<8xf32>
    gpuc.yield %e : tensor<8xf32>
  }
  return %n : tensor<8xf32>
}

// -----

// expected-error @+1 {{an arena slot's offset is a multiple of 64 bytes, not 3}}
func.func @misaligned() attributes {gpuc.slot = #gpuc.slot<offset = 3, bytes = 4>} {
  return
}

// -----

// expected-error @+1 {{has no memory plan ('gpuc.memory' with arena_peak; run gpuc-plan-memory)}}
func.func @no_peak() attributes {gpuc.memory = {lower_bound = 0 : i64}} {
  return
}
