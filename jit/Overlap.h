// Whether two arguments of one call may share memory: what refuses an output that aliases an
// input or another output (jit::validate), judged from addresses, sizes and strides alone (the
// memory is never read).
#pragma once

#include <array>
#include <cstdint>

namespace flashbob::jit {

// The bytes one argument occupies: rows of `rowBytes` contiguous bytes, one at
// start + i0 * strideBytes[0] + i1 * strideBytes[1] + i2 * strideBytes[2] for every
// 0 <= i < sizes. A tensor's rows are its head_dim vectors; a contiguous argument (a row vector,
// the offsets) is one row.
struct Footprint {
  uint64_t start = 0;
  uint64_t rowBytes = 0;
  std::array<int64_t, 3> sizes{1, 1, 1};
  std::array<uint64_t, 3> strideBytes{0, 0, 0};
  // From `start` to the end of the last row (the caller checked that it does not overflow).
  uint64_t extentBytes = 0;

  static Footprint contiguous(uint64_t start, uint64_t bytes);
};

// Whether `a` and `b` may share a byte. Exact for contiguous arguments and for strided ones
// whose extents are apart; for extents that overlap it is false only when the rows provably
// interleave without meeting, as the q, k, v (or dq, dk, dv) views of one packed qkv tensor do:
// every row of each starts at the same offset modulo a period that divides all their strides,
// and the two rows fit side by side within that period.
bool mayOverlap(const Footprint &a, const Footprint &b);

} // namespace flashbob::jit
