// bob-differentiate-score-mod: the exact partials it writes for the oracle's modifications
// (softcap, ALiBi in both forms, a broadcast bias, T5's relative table), a capture read twice,
// and what it leaves alone (a mask, an op that has partials). The values of these regions
// are checked numerically by score_mod_region_test.
// RUN: flashbob-opt %s --bob-differentiate-score-mod | FileCheck %s
// The output verifies and differentiating it again changes nothing.
// RUN: flashbob-opt %s --bob-differentiate-score-mod | flashbob-opt --bob-differentiate-score-mod | FileCheck %s

// Softcap f = c tanh(T / c), a = T / c, t = tanh a:
//   F1 = c ((1 - t t) (1 / c))          (= 1 - t^2)
//   F2 = c ((-(t F1' + t F1')) (1 / c))  with F1' = (1 - t t) (1 / c)    (= -2 t (1 - t^2) / c)
//   df/dc = t + c ((1 - t t) (-a / c))   (= t - a (1 - t^2))
// CHECK-LABEL: func.func @softcap(
// CHECK: bob.score_mod captures(%{{.+}} : f32) {
// The body, as written.
// CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index, %cap0: f32):
// CHECK-NEXT: %[[A:.+]] = arith.divf %score, %cap0 : f32
// CHECK-NEXT: %[[T:.+]] = math.tanh %[[A]] : f32
// CHECK-NEXT: %[[R:.+]] = arith.mulf %cap0, %[[T]] : f32
// CHECK-NEXT: bob.yield %[[R]] : f32
// CHECK-NEXT: } d(score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[A:.+]] = arith.divf %score, %cap0 : f32
// CHECK-NEXT: %[[DA:.+]] = arith.divf %[[ONE]], %cap0 : f32
// CHECK-NEXT: %[[T:.+]] = math.tanh %[[A]] : f32
// CHECK-NEXT: %[[T2:.+]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK-NEXT: %[[SECH2:.+]] = arith.subf %[[ONE]], %[[T2]] : f32
// CHECK-NEXT: %[[DT:.+]] = arith.mulf %[[SECH2]], %[[DA]] : f32
// CHECK-NEXT: %[[F1:.+]] = arith.mulf %cap0, %[[DT]] : f32
// CHECK-NEXT: bob.yield %[[F1]] : f32
// CHECK-NEXT: } d(score, score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[A:.+]] = arith.divf %score, %cap0 : f32
// CHECK-NEXT: %[[DA:.+]] = arith.divf %[[ONE]], %cap0 : f32
// CHECK-NEXT: %[[T:.+]] = math.tanh %[[A]] : f32
// CHECK-NEXT: %[[T2:.+]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK-NEXT: %[[SECH2:.+]] = arith.subf %[[ONE]], %[[T2]] : f32
// CHECK-NEXT: %[[DT:.+]] = arith.mulf %[[SECH2]], %[[DA]] : f32
// CHECK-NEXT: %[[TDT:.+]] = arith.mulf %[[T]], %[[DT]] : f32
// CHECK-NEXT: %[[DT2:.+]] = arith.addf %[[TDT]], %[[TDT]] : f32
// CHECK-NEXT: %[[DSECH2:.+]] = arith.negf %[[DT2]] : f32
// CHECK-NEXT: %[[DDT:.+]] = arith.mulf %[[DSECH2]], %[[DA]] : f32
// CHECK-NEXT: %[[F2:.+]] = arith.mulf %cap0, %[[DDT]] : f32
// CHECK-NEXT: bob.yield %[[F2]] : f32
// d(F1)/dc = F1/c + c (sech2' (1 / c) + sech2 (-(1 / c) / c)) with a' = -a / c and
// sech2' = -(t (sech2 a') + t (sech2 a'))                            (= 2 a t (1 - t^2) / c)
// CHECK-NEXT: } d(score, capture 0) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[A:.+]] = arith.divf %score, %cap0 : f32
// CHECK-NEXT: %[[NA:.+]] = arith.negf %[[A]] : f32
// CHECK-NEXT: %[[DADC:.+]] = arith.divf %[[NA]], %cap0 : f32
// CHECK-NEXT: %[[DA:.+]] = arith.divf %[[ONE]], %cap0 : f32
// CHECK-NEXT: %[[NDA:.+]] = arith.negf %[[DA]] : f32
// CHECK-NEXT: %[[DDADC:.+]] = arith.divf %[[NDA]], %cap0 : f32
// CHECK-NEXT: %[[T:.+]] = math.tanh %[[A]] : f32
// CHECK-NEXT: %[[T2:.+]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK-NEXT: %[[SECH2:.+]] = arith.subf %[[ONE]], %[[T2]] : f32
// CHECK-NEXT: %[[DTDC:.+]] = arith.mulf %[[SECH2]], %[[DADC]] : f32
// CHECK-NEXT: %[[TDT:.+]] = arith.mulf %[[T]], %[[DTDC]] : f32
// CHECK-NEXT: %[[DT2:.+]] = arith.addf %[[TDT]], %[[TDT]] : f32
// CHECK-NEXT: %[[DSECH2:.+]] = arith.negf %[[DT2]] : f32
// CHECK-NEXT: %[[DT:.+]] = arith.mulf %[[SECH2]], %[[DA]] : f32
// CHECK-NEXT: %[[X:.+]] = arith.mulf %[[SECH2]], %[[DDADC]] : f32
// CHECK-NEXT: %[[Y:.+]] = arith.mulf %[[DSECH2]], %[[DA]] : f32
// CHECK-NEXT: %[[DDT:.+]] = arith.addf %[[Y]], %[[X]] : f32
// CHECK-NEXT: %[[CDDT:.+]] = arith.mulf %cap0, %[[DDT]] : f32
// CHECK-NEXT: %[[DF1:.+]] = arith.addf %[[DT]], %[[CDDT]] : f32
// CHECK-NEXT: bob.yield %[[DF1]] : f32
// CHECK-NEXT: } d(capture 0) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[A:.+]] = arith.divf %score, %cap0 : f32
// CHECK-NEXT: %[[NA:.+]] = arith.negf %[[A]] : f32
// CHECK-NEXT: %[[DADC:.+]] = arith.divf %[[NA]], %cap0 : f32
// CHECK-NEXT: %[[T:.+]] = math.tanh %[[A]] : f32
// CHECK-NEXT: %[[T2:.+]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK-NEXT: %[[SECH2:.+]] = arith.subf %[[ONE]], %[[T2]] : f32
// CHECK-NEXT: %[[DTDC:.+]] = arith.mulf %[[SECH2]], %[[DADC]] : f32
// CHECK-NEXT: %[[CDT:.+]] = arith.mulf %cap0, %[[DTDC]] : f32
// CHECK-NEXT: %[[DFDC:.+]] = arith.addf %[[T]], %[[CDT]] : f32
// CHECK-NEXT: bob.yield %[[DFDC]] : f32
// d2f/dc2 = t' + (t' + c (sech2' a' + sech2 a'')) with t' = sech2 a', a'' = (-a' - a') / c
//                                                                   (= -2 a^2 t (1 - t^2) / c)
// CHECK-NEXT: } d(capture 0, capture 0) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[A:.+]] = arith.divf %score, %cap0 : f32
// CHECK-NEXT: %[[NA:.+]] = arith.negf %[[A]] : f32
// CHECK-NEXT: %[[DADC:.+]] = arith.divf %[[NA]], %cap0 : f32
// CHECK-NEXT: %[[NDADC:.+]] = arith.negf %[[DADC]] : f32
// CHECK-NEXT: %[[DIFF:.+]] = arith.subf %[[NDADC]], %[[DADC]] : f32
// CHECK-NEXT: %[[DDADC:.+]] = arith.divf %[[DIFF]], %cap0 : f32
// CHECK-NEXT: %[[T:.+]] = math.tanh %[[A]] : f32
// CHECK-NEXT: %[[T2:.+]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK-NEXT: %[[SECH2:.+]] = arith.subf %[[ONE]], %[[T2]] : f32
// CHECK-NEXT: %[[DTDC:.+]] = arith.mulf %[[SECH2]], %[[DADC]] : f32
// CHECK-NEXT: %[[TDT:.+]] = arith.mulf %[[T]], %[[DTDC]] : f32
// CHECK-NEXT: %[[DT2:.+]] = arith.addf %[[TDT]], %[[TDT]] : f32
// CHECK-NEXT: %[[DSECH2:.+]] = arith.negf %[[DT2]] : f32
// CHECK-NEXT: %[[X:.+]] = arith.mulf %[[SECH2]], %[[DDADC]] : f32
// CHECK-NEXT: %[[Y:.+]] = arith.mulf %[[DSECH2]], %[[DADC]] : f32
// CHECK-NEXT: %[[DDTDC:.+]] = arith.addf %[[Y]], %[[X]] : f32
// CHECK-NEXT: %[[CDDT:.+]] = arith.mulf %cap0, %[[DDTDC]] : f32
// CHECK-NEXT: %[[Z:.+]] = arith.addf %[[DTDC]], %[[CDDT]] : f32
// CHECK-NEXT: %[[D2F:.+]] = arith.addf %[[DTDC]], %[[Z]] : f32
// CHECK-NEXT: bob.yield %[[D2F]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @softcap(%cap: f32) -> !bob.score_fn {
  %f = bob.score_mod captures(%cap : f32) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32):
    %a = arith.divf %s, %c : f32
    %t = math.tanh %a : f32
    %r = arith.mulf %c, %t : f32
    bob.yield %r : f32
  }
  return %f : !bob.score_fn
}

// ALiBi, symmetric: f = T - slope_h |r|, r = kv_idx - (q_idx + M - N). F1 = 1 and F2 = 0 as
// constants; df/dslope: one group (-|r|, h), without the slope's load; nothing else.
// CHECK-LABEL: func.func @alibi_symmetric(
// CHECK: } d(score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[ONE]] : f32
// CHECK-NEXT: } d(score, score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[ZERO]] : f32
// CHECK-NEXT: } d(capture 0) {
// CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index, %cap0: memref<?xf32>, %cap1: index):
// CHECK-NEXT: %[[DIAG:.+]] = arith.addi %q_idx, %cap1 : index
// CHECK-NEXT: %[[R:.+]] = arith.subi %kv_idx, %[[DIAG]] : index
// CHECK-NEXT: %[[R64:.+]] = arith.index_cast %[[R]] : index to i64
// CHECK-NEXT: %[[ABS:.+]] = math.absi %[[R64]] : i64
// CHECK-NEXT: %[[DIST:.+]] = arith.sitofp %[[ABS]] : i64 to f32
// CHECK-NEXT: %[[NEG:.+]] = arith.negf %[[DIST]] : f32
// CHECK-NEXT: bob.yield %[[NEG]], %h : f32, index
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @alibi_symmetric(%slopes: memref<?xf32>, %offset: index) -> !bob.score_fn {
  %f = bob.score_mod captures(%slopes, %offset : memref<?xf32>, index) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %sl: memref<?xf32>, %off: index):
    %diag = arith.addi %q, %off : index
    %r = arith.subi %kv, %diag : index
    %r64 = arith.index_cast %r : index to i64
    %abs = math.absi %r64 : i64
    %dist = arith.sitofp %abs : i64 to f32
    %slope = memref.load %sl[%h] : memref<?xf32>
    %m = arith.mulf %slope, %dist : f32
    %out = arith.subf %s, %m : f32
    bob.yield %out : f32
  }
  return %f : !bob.score_fn
}

// ALiBi, the causal form: f = T + slope_h r; df/dslope: one group (r, h).
// CHECK-LABEL: func.func @alibi_linear(
// CHECK: } d(capture 0) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[DIAG:.+]] = arith.addi %q_idx, %cap1 : index
// CHECK-NEXT: %[[R:.+]] = arith.subi %kv_idx, %[[DIAG]] : index
// CHECK-NEXT: %[[R64:.+]] = arith.index_cast %[[R]] : index to i64
// CHECK-NEXT: %[[RF:.+]] = arith.sitofp %[[R64]] : i64 to f32
// CHECK-NEXT: bob.yield %[[RF]], %h : f32, index
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @alibi_linear(%slopes: memref<?xf32>, %offset: index) -> !bob.score_fn {
  %f = bob.score_mod captures(%slopes, %offset : memref<?xf32>, index) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %sl: memref<?xf32>, %off: index):
    %diag = arith.addi %q, %off : index
    %r = arith.subi %kv, %diag : index
    %r64 = arith.index_cast %r : index to i64
    %dist = arith.sitofp %r64 : i64 to f32
    %slope = memref.load %sl[%h] : memref<?xf32>
    %m = arith.mulf %slope, %dist : f32
    %out = arith.addf %s, %m : f32
    bob.yield %out : f32
  }
  return %f : !bob.score_fn
}

// A bias broadcast over the batch, f = T + B[0, h, q_idx, kv_idx]: F1 = 1, F2 = 0, and
// df/dB: one group (1, 0, h, q_idx, kv_idx), where the gradient of the broadcast lands.
// CHECK-LABEL: func.func @bias(
// CHECK: } d(score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[ONE]] : f32
// CHECK-NEXT: } d(score, score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[ZERO]] : f32
// CHECK-NEXT: } d(capture 0) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[C0:.+]] = arith.constant 0 : index
// CHECK-NEXT: bob.yield %[[ONE]], %[[C0]], %h, %q_idx, %kv_idx : f32, index, index, index, index
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @bias(%bias: memref<?x?x?x?xf32>) -> !bob.score_fn {
  %f = bob.score_mod captures(%bias : memref<?x?x?x?xf32>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %B: memref<?x?x?x?xf32>):
    %c0 = arith.constant 0 : index
    %x = memref.load %B[%c0, %h, %q, %kv] : memref<?x?x?x?xf32>
    %r = arith.addf %s, %x : f32
    bob.yield %r : f32
  }
  return %f : !bob.score_fn
}

// T5's relative table (bidirectional, 32 buckets, max distance 128), f = T + table[h, bucket(r)]:
// dtable: one group (1, h, bucket), the bucket's integer arithmetic kept, the table's load not.
// CHECK-LABEL: func.func @relative_table(
// CHECK: } d(score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[ONE]] : f32
// CHECK-NEXT: } d(score, score) {
// CHECK: } d(capture 0) {
// CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index, %cap0: memref<?x?xf32>, %cap1: index):
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NOT: memref.load
// CHECK: math.log
// CHECK-NOT: memref.load
// CHECK: arith.fptosi %{{.+}} : f32 to i64
// CHECK-NOT: memref.load
// CHECK: %[[WITHIN:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : index
// CHECK-NEXT: %[[BUCKET:.+]] = arith.addi %{{.+}}, %[[WITHIN]] : index
// CHECK-NEXT: bob.yield %[[ONE]], %h, %[[BUCKET]] : f32, index, index
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @relative_table(%table: memref<?x?xf32>, %offset: index) -> !bob.score_fn {
  %f = bob.score_mod captures(%table, %offset : memref<?x?xf32>, index) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %t: memref<?x?xf32>, %off: index):
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c15 = arith.constant 15 : index
    %c16 = arith.constant 16 : index
    %exact = arith.constant 8.0 : f32
    %far = arith.constant 128.0 : f32
    %diag = arith.addi %q, %off : index
    %r = arith.subi %kv, %diag : index
    %right = arith.cmpi sgt, %r, %c0 : index
    %half = arith.select %right, %c16, %c0 : index
    %n = math.absi %r : index
    %small = arith.cmpi slt, %n, %c8 : index
    %nlog = arith.maxsi %n, %c8 : index
    %n64 = arith.index_cast %nlog : index to i64
    %nf = arith.sitofp %n64 : i64 to f32
    %ratio = arith.divf %nf, %exact : f32
    %log = math.log %ratio : f32
    %range = arith.divf %far, %exact : f32
    %logRange = math.log %range : f32
    %frac = arith.divf %log, %logRange : f32
    %scaled = arith.mulf %frac, %exact : f32
    %steps64 = arith.fptosi %scaled : f32 to i64
    %steps = arith.index_cast %steps64 : i64 to index
    %large = arith.addi %c8, %steps : index
    %capped = arith.minsi %large, %c15 : index
    %within = arith.select %small, %n, %capped : index
    %bucket = arith.addi %half, %within : index
    %x = memref.load %t[%h, %bucket] : memref<?x?xf32>
    %out = arith.addf %s, %x : f32
    bob.yield %out : f32
  }
  return %f : !bob.score_fn
}

// A softcap and a bias: the tags in order, the bias's partial without the cap, and no
// partial that is zero (after the score or the cap, or the bias's second one).
// CHECK-LABEL: func.func @softcap_bias(
// CHECK: } d(score) {
// CHECK: } d(score, score) {
// CHECK: } d(score, capture 0) {
// CHECK: } d(capture 0) {
// CHECK: } d(capture 0, capture 0) {
// CHECK: } d(capture 1) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[ONE]], %b, %h, %q_idx, %kv_idx : f32, index, index, index, index
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @softcap_bias(%cap: f32, %bias: memref<?x?x?x?xf32>) -> !bob.score_fn {
  %f = bob.score_mod captures(%cap, %bias : f32, memref<?x?x?x?xf32>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32, %B: memref<?x?x?x?xf32>):
    %a = arith.divf %s, %c : f32
    %t = math.tanh %a : f32
    %capped = arith.mulf %c, %t : f32
    %x = memref.load %B[%b, %h, %q, %kv] : memref<?x?x?x?xf32>
    %out = arith.addf %capped, %x : f32
    bob.yield %out : f32
  }
  return %f : !bob.score_fn
}

// A capture read at two places, f = T + v[h] v[kv_idx]: a group per load (v[kv_idx] at h,
// v[h] at kv_idx), then one per pair of loads (coefficient, the first load's index, the
// second's): 1 at (kv_idx, h) and 1 at (h, kv_idx).
// CHECK-LABEL: func.func @two_reads(
// CHECK: } d(capture 0) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[VH:.+]] = memref.load %cap0[%h] : memref<?xf32>
// CHECK-NEXT: %[[VKV:.+]] = memref.load %cap0[%kv_idx] : memref<?xf32>
// CHECK-NEXT: bob.yield %[[VKV]], %h, %[[VH]], %kv_idx : f32, index, f32, index
// CHECK-NEXT: } d(capture 0, capture 0) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[ONE]], %kv_idx, %h, %[[ONE]], %h, %kv_idx : f32, index, index, f32, index, index
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @two_reads(%v: memref<?xf32>) -> !bob.score_fn {
  %f = bob.score_mod captures(%v : memref<?xf32>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %vec: memref<?xf32>):
    %vh = memref.load %vec[%h] : memref<?xf32>
    %vkv = memref.load %vec[%kv] : memref<?xf32>
    %p = arith.mulf %vh, %vkv : f32
    %out = arith.addf %s, %p : f32
    bob.yield %out : f32
  }
  return %f : !bob.score_fn
}

// A mask has no partials: unchanged.
// CHECK-LABEL: func.func @mask(
// CHECK-NEXT: %mask_fn = bob.score_mask {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index):
// CHECK-NEXT: %[[V:.+]] = arith.cmpi ule, %kv_idx, %q_idx : index
// CHECK-NEXT: bob.yield %[[V]] : i1
// CHECK-NEXT: }
func.func @mask() -> !bob.mask_fn {
  %m = bob.score_mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %v = arith.cmpi ule, %kv, %q : index
    bob.yield %v : i1
  }
  return %m : !bob.mask_fn
}

// An op that has partials (a front end's own) is left as it is.
// CHECK-LABEL: func.func @given(
// CHECK: } d(score) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT: bob.yield %[[TWO]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @given() -> !bob.score_fn {
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %two, %s : f32
    bob.yield %r : f32
  } d(score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %two = arith.constant 2.0 : f32
    bob.yield %two : f32
  }
  return %f : !bob.score_fn
}
