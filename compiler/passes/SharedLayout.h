// The layout of shared tiles, agreed on by bob-allocate-shared (sizes, offsets) and
// bob-lower-tiles (addresses). Row-major with each row padded by 16 bytes: ldmatrix reads 8 rows
// of 16 bytes, and with a row pitch of (cols + 8) * 2 bytes those rows start in 8 different
// 4-bank groups, so neither ldmatrix nor the 16-byte cp.async writes conflict.
#pragma once

#include "compiler/dialect/BobDialect.h"

namespace flashbob::bob::shared {

inline constexpr int64_t kAlignment = 128;

inline int64_t elementBytes(SharedTileType t) {
  return t.getElementType().getIntOrFloatBitWidth() / 8;
}
// Elements between the starts of two consecutive rows.
inline int64_t rowPitch(SharedTileType t) { return t.getCols() + 16 / elementBytes(t); }
inline int64_t tileBytes(SharedTileType t) { return t.getRows() * rowPitch(t) * elementBytes(t); }

} // namespace flashbob::bob::shared
