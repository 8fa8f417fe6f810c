// A float64 evaluator of bob.score_mod and bob.score_mask regions, for the tests: it walks the
// closed set of ops a region may hold (BobOps.td) on one pair, f32 values in double (the
// oracle's precision, so a region and kernels/oracle/ScoreModOps.h agree to rounding) and
// integers exactly in their widths. It is the CPU's reading of a region; the kernels will
// inline the same regions per fragment element.
#pragma once

#include "compiler/dialect/BobDialect.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace flashbob::test {

// A capture's value: a scalar (f32 or integer), or a row-major tensor for a memref.
struct Capture {
  double scalar = 0.0;
  std::vector<int64_t> shape;
  std::vector<double> data;

  static Capture of(double value) { return {value, {}, {}}; }
  static Capture tensor(std::vector<int64_t> shape, std::vector<double> data) {
    return {0.0, std::move(shape), std::move(data)};
  }
  // The row-major position of `indices` (throws std::out_of_range outside the shape).
  size_t offset(const std::vector<int64_t> &indices) const;
};

// The elements a region read: capture number -> row-major offsets.
using Reads = std::map<unsigned, std::vector<size_t>>;

// Evaluates `region` (the body or a partial of a bob.score_mod, or a bob.score_mask's body) at
// the leading arguments (score, b, h, q_idx, kv_idx; a mask's without the score) and the
// captures (one per operand of the op). Returns the yielded values: f32 as double, integers
// and i1 as their values. fptosi saturates (NaN to 0), as PTX's cvt does where arith says
// poison. Throws std::runtime_error on an op outside the set, std::out_of_range on a load
// outside its capture. `reads`, if given, collects the elements the loads read.
std::vector<double> evaluate(mlir::Region &region, const std::vector<double> &leading,
                             const std::vector<Capture> &captures, Reads *reads = nullptr);

} // namespace flashbob::test
