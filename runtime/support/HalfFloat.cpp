#include "runtime/support/HalfFloat.h"

#include "llvm/ADT/APFloat.h"

namespace flashbob::runtime {

// IEEE half conversions go through llvm::APFloat: exact rounding, no hand-written bit tricks.
uint16_t floatToHalf(float f) {
  llvm::APFloat value(f);
  bool losesInfo = false;
  value.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return static_cast<uint16_t>(value.bitcastToAPInt().getZExtValue());
}

float halfToFloat(uint16_t h) {
  llvm::APFloat value(llvm::APFloat::IEEEhalf(), llvm::APInt(16, h));
  bool losesInfo = false;
  value.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return value.convertToFloat();
}

} // namespace flashbob::runtime
