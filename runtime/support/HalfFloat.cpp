#include "runtime/support/HalfFloat.h"

#include "llvm/ADT/APFloat.h"

#include <array>

namespace flashbob::runtime {

// Every conversion goes through llvm::APFloat: exact IEEE rounding and NaN handling, no
// hand-written bit tricks.
namespace {

uint16_t narrow(float f, const llvm::fltSemantics &to) {
  llvm::APFloat value(f);
  bool losesInfo = false;
  value.convert(to, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return static_cast<uint16_t>(value.bitcastToAPInt().getZExtValue());
}

float widen(uint16_t bits, const llvm::fltSemantics &from) {
  llvm::APFloat value(from, llvm::APInt(16, bits));
  bool losesInfo = false;
  value.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return value.convertToFloat();
}

// Widening has only 65536 inputs: a table filled once through APFloat keeps reading outputs of
// large problems (hundreds of millions of elements) as fast as the shift it replaces.
using WideTable = std::array<float, 65536>;
WideTable makeTable(const llvm::fltSemantics &from) {
  WideTable t;
  for (uint32_t bits = 0; bits < 65536; ++bits)
    t[bits] = widen(static_cast<uint16_t>(bits), from);
  return t;
}

} // namespace

uint16_t floatToBf16(float f) { return narrow(f, llvm::APFloat::BFloat()); }
uint16_t floatToHalf(float f) { return narrow(f, llvm::APFloat::IEEEhalf()); }

float bf16ToFloat(uint16_t h) {
  static const WideTable table = makeTable(llvm::APFloat::BFloat());
  return table[h];
}

float halfToFloat(uint16_t h) {
  static const WideTable table = makeTable(llvm::APFloat::IEEEhalf());
  return table[h];
}

} // namespace flashbob::runtime
