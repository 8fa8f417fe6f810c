// Round trip of bob.score_mod, bob.score_mask and bob.yield (BobOps.td): parse, print, parse
// again, print again, in the custom and the generic form. The CHECK lines pin the printed form:
// captures, the named block arguments, the partials' d(...) tags.
// RUN: flashbob-opt %s | flashbob-opt | FileCheck %s
// RUN: flashbob-opt %s -mlir-print-op-generic | flashbob-opt | FileCheck %s

// A softcap with its partials as bob-differentiate-score-mod writes them (d(score) first).
// CHECK-LABEL: func.func @softcap(
// CHECK-SAME: %[[CAP:[a-z0-9]+]]: f32
func.func @softcap(%cap: f32) -> !bob.score_fn {
  // CHECK: %score_fn = bob.score_mod captures(%[[CAP]] : f32) {
  // CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index, %cap0: f32):
  // CHECK-NEXT: %[[A:.+]] = arith.divf %score, %cap0 : f32
  // CHECK-NEXT: %[[T:.+]] = math.tanh %[[A]] : f32
  // CHECK-NEXT: %[[R:.+]] = arith.mulf %cap0, %[[T]] : f32
  // CHECK-NEXT: bob.yield %[[R]] : f32
  // CHECK-NEXT: } d(score) {
  // CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index, %cap0: f32):
  // CHECK: bob.yield %{{.+}} : f32
  // CHECK-NEXT: } d(score, capture 0) {
  // CHECK: } d(capture 0) {
  // CHECK: bob.yield %{{.+}} : f32
  // CHECK-NEXT: }
  %f = bob.score_mod captures(%cap : f32) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32):
    %a = arith.divf %s, %c : f32
    %t = math.tanh %a : f32
    %r = arith.mulf %c, %t : f32
    bob.yield %r : f32
  } d(score) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32):
    %one = arith.constant 1.0 : f32
    %a = arith.divf %s, %c : f32
    %t = math.tanh %a : f32
    %t2 = arith.mulf %t, %t : f32
    %d = arith.subf %one, %t2 : f32
    bob.yield %d : f32
  } d(score, capture 0) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32):
    %zero = arith.constant 0.0 : f32
    bob.yield %zero : f32
  } d(capture 0) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32):
    %a = arith.divf %s, %c : f32
    %t = math.tanh %a : f32
    bob.yield %t : f32
  }
  return %f : !bob.score_fn
}

// Memref and index captures, integer ops, a partial yielding a group (coefficient, index),
// and attributes of the op's own.
// CHECK-LABEL: func.func @alibi(
func.func @alibi(%slopes: memref<?xf32>, %offset: index) -> !bob.score_fn {
  // CHECK: bob.score_mod captures(%{{.+}}, %{{.+}} : memref<?xf32>, index) attributes {note = "alibi"} {
  // CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index, %cap0: memref<?xf32>, %cap1: index):
  // CHECK: math.absi %{{.+}} : i64
  // CHECK: memref.load %cap0[%h] : memref<?xf32>
  // CHECK: } d(capture 0) {
  // CHECK: bob.yield %{{.+}}, %h : f32, index
  %f = bob.score_mod captures(%slopes, %offset : memref<?xf32>, index) attributes {note = "alibi"} {
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
  } d(capture 0) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %sl: memref<?xf32>, %off: index):
    %diag = arith.addi %q, %off : index
    %r = arith.subi %kv, %diag : index
    %r64 = arith.index_cast %r : index to i64
    %abs = math.absi %r64 : i64
    %dist = arith.sitofp %abs : i64 to f32
    %neg = arith.negf %dist : f32
    bob.yield %neg, %h : f32, index
  }
  return %f : !bob.score_fn
}

// No captures.
// CHECK-LABEL: func.func @plain(
func.func @plain() -> !bob.score_fn {
  // CHECK: %score_fn = bob.score_mod {
  // CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index):
  // CHECK-NEXT: bob.yield %score : f32
  %f = bob.score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    bob.yield %s : f32
  }
  return %f : !bob.score_fn
}

// A mask: no score argument, yields i1.
// CHECK-LABEL: func.func @mask(
func.func @mask(%docs: memref<?x?xi32>) -> !bob.mask_fn {
  // CHECK: %mask_fn = bob.score_mask captures(%{{.+}} : memref<?x?xi32>) {
  // CHECK-NEXT: ^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index, %cap0: memref<?x?xi32>):
  // CHECK-NEXT: %[[DQ:.+]] = memref.load %cap0[%b, %q_idx] : memref<?x?xi32>
  // CHECK-NEXT: %[[DK:.+]] = memref.load %cap0[%b, %kv_idx] : memref<?x?xi32>
  // CHECK-NEXT: %[[SAME:.+]] = arith.cmpi eq, %[[DQ]], %[[DK]] : i32
  // CHECK-NEXT: bob.yield %[[SAME]] : i1
  %m = bob.score_mask captures(%docs : memref<?x?xi32>) {
  ^bb0(%b: index, %h: index, %q: index, %kv: index, %d: memref<?x?xi32>):
    %dq = memref.load %d[%b, %q] : memref<?x?xi32>
    %dk = memref.load %d[%b, %kv] : memref<?x?xi32>
    %same = arith.cmpi eq, %dq, %dk : i32
    bob.yield %same : i1
  }
  return %m : !bob.mask_fn
}
