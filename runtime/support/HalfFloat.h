// float <-> bf16 / fp16 bit patterns on the host, round to nearest even (what the GPU's cvt.rn
// does), for preparing inputs and reading outputs. A NaN stays a NaN (quiet, sign kept).
#pragma once

#include <cstdint>

namespace flashbob::runtime {

uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t h);

uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);

} // namespace flashbob::runtime
