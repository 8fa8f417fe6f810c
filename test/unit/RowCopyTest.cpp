// runtime::planRowCopy, the driver copies that move strided rows (what a call whose head dim is
// copied into zero-padded memory enqueues: jit/HeadDims.h): for layouts with one evenly spaced
// run of rows, two, and none, the plan is one 2D copy, one 3D copy, or a loop of them, within
// the driver's documented limits (pitches at least a row and at most the maximum pitch, a 3D
// array's height at least the copy's); carried out on host memory as the driver defines the
// copies, it moves every row's bytes and writes nothing else.
#include "runtime/launch/RowCopy.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

using namespace flashbob::runtime;

namespace {

// What cuMemcpy2D/3D do, on host memory (CUDA's definition of a copy's addresses).
void carryOut(const CUDA_MEMCPY3D &c) {
  for (size_t z = 0; z < c.Depth; ++z)
    for (size_t y = 0; y < c.Height; ++y)
      std::memmove(reinterpret_cast<char *>(c.dstDevice) + (z * c.dstHeight + y) * c.dstPitch,
                   reinterpret_cast<const char *>(c.srcDevice) + (z * c.srcHeight + y) * c.srcPitch,
                   c.WidthInBytes);
}

// The limits cuMemcpy2D/3D document for each copy.
void checkLimits(const CUDA_MEMCPY3D &c, int64_t maxPitch) {
  CHECK(c.srcPitch >= c.WidthInBytes);
  CHECK(c.dstPitch >= c.WidthInBytes);
  CHECK(c.srcPitch <= size_t(maxPitch));
  CHECK(c.dstPitch <= size_t(maxPitch));
  if (c.Depth > 1) {
    CHECK(c.srcHeight >= c.Height);
    CHECK(c.dstHeight >= c.Height);
  }
}

struct Layout {
  int64_t extents[3];
  int64_t src[3], dst[3]; // strides in elements of 2 bytes
  int64_t rowElements;
  size_t copies;          // driver calls the plan should take
  size_t depth;           // 1: 2D copies
};

void run(const Layout &l, int64_t maxPitch = 2147483647) {
  auto span = [&](const int64_t *strides) {
    int64_t last = l.rowElements;
    for (int i = 0; i < 3; ++i)
      last += (l.extents[i] - 1) * strides[i];
    return size_t(last);
  };
  std::vector<uint16_t> src(span(l.src)), dst(span(l.dst), 0xFFFF), want(dst);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = uint16_t(i * 7 + 1);
  RowArray s, d;
  s.base = reinterpret_cast<CUdeviceptr>(src.data());
  d.base = reinterpret_cast<CUdeviceptr>(dst.data());
  for (int i = 0; i < 3; ++i) {
    s.strideBytes[i] = l.src[i] * 2;
    d.strideBytes[i] = l.dst[i] * 2;
  }
  for (int64_t a = 0; a < l.extents[0]; ++a)
    for (int64_t b = 0; b < l.extents[1]; ++b)
      for (int64_t c = 0; c < l.extents[2]; ++c)
        std::memcpy(&want[size_t(a * l.dst[0] + b * l.dst[1] + c * l.dst[2])],
                    &src[size_t(a * l.src[0] + b * l.src[1] + c * l.src[2])],
                    size_t(l.rowElements) * 2);
  const std::vector<CUDA_MEMCPY3D> plan = planRowCopy(l.extents, s, d, l.rowElements * 2, maxPitch);
  CHECK(plan.size() == l.copies);
  for (const CUDA_MEMCPY3D &c : plan) {
    CHECK(c.Depth == l.depth);
    CHECK(c.WidthInBytes == size_t(l.rowElements * 2));
    checkLimits(c, maxPitch);
    carryOut(c);
  }
  CHECK(dst == want);
}

} // namespace

TEST_CASE("row copies: one 2D or 3D copy where the strides allow, a loop where not", "[runtime]") {
  const int64_t d = 100, w = 112; // a head dim and its padded width
  SECTION("(batch, heads, seq, d) contiguous: every row evenly spaced, one 2D copy") {
    run({{2, 3, 50}, {3 * 50 * d, 50 * d, d}, {3 * 50 * w, 50 * w, w}, d, 1, 1});
  }
  SECTION("(batch, seq, heads, d) memory, and a packed batch's (total, heads, d): one 2D copy") {
    run({{2, 3, 50}, {50 * 3 * d, d, 3 * d}, {50 * 3 * w, w, 3 * w}, d, 1, 1});
    run({{1, 3, 70}, {70 * 3 * d, d, 3 * d}, {70 * 3 * w, w, 3 * w}, d, 1, 1});
  }
  SECTION("q of a packed (batch, seq, 3, heads, d) qkv: heads a run inside each position, 3D") {
    run({{2, 4, 30}, {30 * 3 * 4 * d, d, 3 * 4 * d}, {30 * 4 * w, w, 4 * w}, d, 1, 60});
  }
  SECTION("positions not a whole number of head rows apart: a loop of 2D copies") {
    run({{2, 4, 30}, {30 * (4 * d + 5), d, 4 * d + 5}, {30 * 4 * w, w, 4 * w}, d, 60, 1});
  }
  SECTION("rows overlapping (an input's heads 8 elements apart): one row a copy where needed") {
    run({{1, 3, 20}, {3 * 20 * d, 8, d}, {3 * 20 * w, 20 * w, w}, d, 3, 1});
    run({{1, 3, 20}, {3 * 20 * d, d, 8}, {3 * 20 * w, w, 3 * w}, d, 20, 1});
  }
  SECTION("a pitch past the driver's limit: no height, one row a copy") {
    run({{1, 3, 10}, {3 * 10 * d, 10 * d, d}, {3 * 10 * w, 10 * w, w}, d, 30, 1}, 2 * d);
  }
  SECTION("extents of 1 are no dimension") {
    run({{1, 1, 1}, {0, 0, 0}, {0, 0, 0}, d, 1, 1});
    run({{1, 1, 40}, {5, 7, d}, {9, 11, w}, d, 1, 1});
  }
}
