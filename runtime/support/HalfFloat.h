// float <-> bf16 / fp16 bit patterns on the host, round to nearest even (what the GPU's cvt.rn
// does), for preparing inputs and reading outputs.
#pragma once

#include <cstdint>
#include <cstring>

namespace flashbob::runtime {

inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);

} // namespace flashbob::runtime
