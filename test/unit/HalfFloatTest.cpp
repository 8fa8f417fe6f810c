// Host bf16 / fp16 conversions: every one of the 65536 bit patterns of each type widens exactly
// (APFloat as the reference, bf16 also against the plain 16-bit shift) and narrows back to
// itself; NaNs stay NaNs, quieted with their sign and top payload bits kept (as the hand-written
// conversion did); narrowing rounds to nearest even, overflowing to infinity.
#include "runtime/support/HalfFloat.h"

#include "llvm/ADT/APFloat.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

using namespace flashbob::runtime;

namespace {

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The conversion this file replaced: round to nearest even on the bits, NaN kept quiet.
uint16_t referenceBf16(float f) {
  uint32_t bits = bitsOf(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float apfloatWiden(uint16_t h, const llvm::fltSemantics &from) {
  llvm::APFloat v(from, llvm::APInt(16, h));
  bool losesInfo = false;
  v.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return v.convertToFloat();
}

} // namespace

TEST_CASE("bf16: all 65536 patterns widen exactly and narrow back", "[halffloat]") {
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16ToFloat(uint16_t(h));
    const bool nan = (h & 0x7fffu) > 0x7f80u;
    if (nan) {
      // Widening keeps the payload, quieted; narrowing back gives the quiet pattern.
      if (!std::isnan(f) || floatToBf16(f) != uint16_t(h | 0x40) ||
          floatToBf16(f) != referenceBf16(f))
        ++mismatches;
      continue;
    }
    if (bitsOf(f) != h << 16 || bitsOf(apfloatWiden(uint16_t(h), llvm::APFloat::BFloat())) != h << 16 ||
        floatToBf16(f) != h)
      ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("bf16: narrowing rounds to nearest even like the bit formula", "[halffloat]") {
  // A stride through all 2^32 float patterns (prime, so every low-bit pattern occurs), plus the
  // halfway cases around an even and an odd last bit and the overflow to infinity.
  int mismatches = 0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4093) {
    float f = fromBits(uint32_t(b));
    if (floatToBf16(f) != referenceBf16(f))
      ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(floatToBf16(fromBits(0x3f808000u)) == 0x3f80); // tie, even below: down
  CHECK(floatToBf16(fromBits(0x3f818000u)) == 0x3f82); // tie, odd below: up
  CHECK(floatToBf16(fromBits(0x3f808001u)) == 0x3f81); // above the tie: up
  CHECK(floatToBf16(fromBits(0x7f7fffffu)) == 0x7f80); // FLT_MAX rounds to +inf
  CHECK(floatToBf16(-0.0f) == 0x8000);
  CHECK(floatToBf16(fromBits(0xffc00001u)) == 0xffc0); // a negative NaN stays negative
}

TEST_CASE("fp16: all 65536 patterns widen exactly and narrow back", "[halffloat]") {
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = halfToFloat(uint16_t(h));
    const bool nan = (h & 0x7fffu) > 0x7c00u;
    if (nan) {
      if (!std::isnan(f) || floatToHalf(f) != uint16_t(h | 0x200))
        ++mismatches;
      continue;
    }
    if (bitsOf(f) != bitsOf(apfloatWiden(uint16_t(h), llvm::APFloat::IEEEhalf())) ||
        floatToHalf(f) != h)
      ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(halfToFloat(0x3c00) == 1.0f);
  CHECK(halfToFloat(0x0001) == std::ldexp(1.0f, -24)); // the smallest subnormal
  CHECK(floatToHalf(65520.0f) == 0x7c00);              // rounds past the largest finite: inf
  CHECK(floatToHalf(65519.0f) == 0x7bff);
  CHECK(floatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00); // tie, even below: down
}
