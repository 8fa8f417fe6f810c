// Every verifier error of bob.score_mod, bob.score_mask and bob.yield, with its message
// (BobDialect.cpp, "Score modifications and masks").
// RUN: flashbob-opt %s -split-input-file -verify-diagnostics

// A capture of a type the region cannot compute with.
func.func @capture_type(%x: f64) {
  // expected-error @+1 {{capture #0 is 'f64'; captures are f32, index or signless integer scalars, or memrefs of f32 or signless integers}}
  %f = bob.score_mod captures(%x : f64) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f64):
    bob.yield %s : f32
  }
  return
}

// -----

func.func @capture_memref_type(%x: memref<?xf16>) {
  // expected-error @+1 {{capture #0 is 'memref<?xf16>'}}
  %f = bob.score_mod captures(%x : memref<?xf16>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: memref<?xf16>):
    bob.yield %s : f32
  }
  return
}

// -----

// The body without the score argument.
func.func @signature() {
  // expected-error @+1 {{the body must take (f32, index, index, index, index) (then one argument per capture), got (index, index, index, index)}}
  %f = bob.score_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %zero = arith.constant 0.0 : f32
    bob.yield %zero : f32
  }
  return
}

// -----

// A capture's block argument of another type than the capture.
func.func @capture_argument(%c: f32) {
  // expected-error @+1 {{the body must take (f32, index, index, index, index, f32) (then one argument per capture), got (f32, index, index, index, index, index)}}
  %f = bob.score_mod captures(%c : f32) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %x: index):
    bob.yield %s : f32
  }
  return
}

// -----

// An op outside the closed set.
func.func @op_not_allowed() {
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{'math.sin' op is not allowed in bob.score_mod: its body is straight-line arith, math and memref.load ops (BobOps.td)}}
    %x = math.sin %s : f32
    bob.yield %x : f32
  }
  return
}

// -----

// Control flow is not in the set either.
func.func @control_flow() {
  %m = bob.score_mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %c = arith.cmpi ule, %kv, %q : index
    // expected-error @+1 {{'scf.if' op is not allowed in bob.score_mask}}
    %v = scf.if %c -> i1 {
      scf.yield %c : i1
    } else {
      scf.yield %c : i1
    }
    bob.yield %v : i1
  }
  return
}

// -----

// Values of other types than f32, index and signless integers.
func.func @value_type() {
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{'arith.constant' op computes 'f64' in bob.score_mod: only f32, index and signless integers}}
    %x = arith.constant 1.0 : f64
    bob.yield %s : f32
  }
  return
}

// -----

func.func @body_yield() {
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{'bob.yield' op must yield the modified score, one f32, in the body of bob.score_mod}}
    bob.yield %s, %s : f32, f32
  }
  return
}

// -----

func.func @mask_yield() {
  %m = bob.score_mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{'bob.yield' op must yield whether the pair is visible, one i1, in the body of bob.score_mask}}
    bob.yield %zero : f32
  }
  return
}

// -----

func.func @mask_signature() {
  // expected-error @+1 {{the body must take (index, index, index, index) (then one argument per capture), got (f32, index, index, index, index)}}
  %m = bob.score_mask {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %c = arith.cmpi ule, %kv, %q : index
    bob.yield %c : i1
  }
  return
}

// -----

// bob.yield ends score modifications and masks only.
func.func @yield_parent() {
  // expected-error @+1 {{'bob.yield' op expects parent op to be one of 'bob.score_mod, bob.score_mask'}}
  bob.yield
}

// -----

// A partial by a capture that is not f32.
func.func @partial_by_index(%off: index) {
  // expected-error @+1 {{partial #0 differentiates by capture 0, which is not an f32 capture (an f32 scalar or a memref of f32)}}
  %f = bob.score_mod captures(%off : index) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %o: index):
    bob.yield %s : f32
  } d(capture 0) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %o: index):
    bob.yield %s : f32
  }
  return
}

// -----

func.func @partial_out_of_range(%c: f32) {
  // expected-error @+1 {{partial #0 differentiates by capture 3, which is not an f32 capture}}
  %f = bob.score_mod captures(%c : f32) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %x: f32):
    bob.yield %s : f32
  } d(capture 3) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %x: f32):
    bob.yield %s : f32
  }
  return
}

// -----

// Tags list the score first, then captures in ascending order.
func.func @partial_order(%c: f32) {
  // expected-error @+1 {{partial #0's tag must list score first, then captures in ascending order}}
  %f = bob.score_mod captures(%c : f32) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %x: f32):
    bob.yield %s : f32
  } d(capture 0, score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %x: f32):
    bob.yield %s : f32
  }
  return
}

// -----

func.func @partial_third_order() {
  // expected-error @+1 {{partial #0 differentiates 3 times; partials are of order 1 or 2}}
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  } d(score, score, score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  }
  return
}

// -----

func.func @partial_repeated() {
  // expected-error @+1 {{partial #1 repeats the tag of partial #0}}
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  } d(score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  } d(score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  }
  return
}

// -----

// A partial region's signature is the body's.
func.func @partial_signature() {
  // expected-error @+1 {{a partial must take (f32, index, index, index, index) (then one argument per capture), got (f32, index, index, index)}}
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  } d(score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index):
    bob.yield %s : f32
  }
  return
}

// -----

// A partial by the score yields one f32.
func.func @partial_value() {
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  } d(score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{'bob.yield' op yields 2 values; a partial by the score and scalars yields one f32}}
    bob.yield %s, %s : f32, f32
  }
  return
}

// -----

// A partial by a rank-2 memref yields groups of three: coefficient, then two indices.
func.func @partial_groups(%t: memref<?x?xf32>) {
  %f = bob.score_mod captures(%t : memref<?x?xf32>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %table: memref<?x?xf32>):
    %x = memref.load %table[%h, %kv] : memref<?x?xf32>
    %r = arith.addf %s, %x : f32
    bob.yield %r : f32
  } d(capture 0) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %table: memref<?x?xf32>):
    %one = arith.constant 1.0 : f32
    // expected-error @+1 {{'bob.yield' op yields 2 values; a partial by memref captures yields groups of 3 (an f32 coefficient and 2 indices)}}
    bob.yield %one, %h : f32, index
  }
  return
}

// -----

func.func @partial_group_types(%t: memref<?xf32>) {
  %f = bob.score_mod captures(%t : memref<?xf32>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %v: memref<?xf32>):
    %x = memref.load %v[%h] : memref<?xf32>
    %r = arith.addf %s, %x : f32
    bob.yield %r : f32
  } d(capture 0) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %v: memref<?xf32>):
    %one = arith.constant 1.0 : f32
    // expected-error @+1 {{'bob.yield' op value #1 is 'f32', expected index (a load index)}}
    bob.yield %one, %one : f32, f32
  }
  return
}

// -----

// The generic form: as many tags as derivative regions.
func.func @partial_tags() {
  // expected-error @+1 {{has 0 derivative regions and 1 tags in `partials`}}
  %f = "bob.score_mod"() <{partials = [array<i64: -1>]}> ({
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  }) : () -> !bob.score_fn
  return
}

// -----

func.func @partial_tag_type() {
  // expected-error @+1 {{partials must be arrays of i64 (a tag per derivative region), got 1 : i64}}
  %f = "bob.score_mod"() <{partials = [1]}> ({
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  }, {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  }) : () -> !bob.score_fn
  return
}

// -----

// Tags in d(...): 'score' or 'capture N'.
func.func @tag_syntax() {
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  // expected-error @+1 {{expected 'capture' or 'score' in a partial's tag}}
  } d(value) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  }
  return
}
