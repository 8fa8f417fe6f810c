#include "jit/Overlap.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace flashbob::jit {

Footprint Footprint::contiguous(uint64_t start, uint64_t bytes) {
  Footprint f;
  f.start = start;
  f.rowBytes = bytes;
  f.extentBytes = bytes;
  return f;
}

namespace {
// A footprint's rows after merging the dimensions that continue a row exactly (heads of
// head_dim-strided rows in a (seq, heads, head_dim) tensor form one row of heads x head_dim),
// so that the period left is the layout's own (3 x heads x head_dim in a packed qkv tensor).
struct Rows {
  uint64_t rowBytes;
  uint64_t period = 0; // gcd of the strides of the dimensions left; 0: one row
};

Rows merged(const Footprint &f) {
  std::array<std::pair<uint64_t, int64_t>, 3> dims; // (stride, size), repeated dims ignored
  size_t count = 0;
  for (size_t i = 0; i < 3; ++i)
    if (f.sizes[i] > 1)
      dims[count++] = {f.strideBytes[i], f.sizes[i]};
  std::sort(dims.begin(), dims.begin() + count);
  Rows rows{f.rowBytes};
  size_t i = 0;
  // The extent was checked to fit 64 bits, so a merged row (within it) does too.
  for (; i < count && dims[i].first == rows.rowBytes; ++i)
    rows.rowBytes *= uint64_t(dims[i].second);
  for (; i < count; ++i)
    rows.period = std::gcd(rows.period, dims[i].first);
  return rows;
}
} // namespace

bool mayOverlap(const Footprint &a, const Footprint &b) {
  if (a.extentBytes == 0 || b.extentBytes == 0)
    return false;
  // Extents apart: nothing shared (the common case: separate buffers).
  if (a.start >= b.start + b.extentBytes || b.start >= a.start + a.extentBytes)
    return false;
  const Rows ra = merged(a), rb = merged(b);
  const uint64_t period = std::gcd(ra.period, rb.period);
  // Both one row each (contiguous): their extents overlap. A period too short for both rows
  // side by side proves nothing.
  if (period == 0 || ra.rowBytes + rb.rowBytes > period)
    return true;
  // Every byte of a is at (a.start mod period) + [0, ra.rowBytes) modulo the period, and b's
  // likewise: apart there, apart everywhere.
  const uint64_t fromA = (b.start % period + period - a.start % period) % period;
  return fromA < ra.rowBytes || period - fromA < rb.rowBytes;
}

} // namespace flashbob::jit
