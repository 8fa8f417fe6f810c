// wgmma's shared-memory operands: the 64-bit matrix descriptors of a swizzled tile and the
// byte offset of each k16 slice (PTX ISA, "matrix descriptor"). Used by both wgmma lowerings:
// both operands from shared memory (WgmmaPattern.cpp) and A from registers (WgmmaRegisterA.cpp).
//
// Operands are read through 64-bit matrix descriptors: start address, leading and stride byte
// offsets (LBO, SBO), swizzle mode. With the swizzled layout of SharedLayout.h (column blocks W
// bytes wide, 8-row atoms of 8W bytes):
//   K-major operand (the inner dimension runs along a tile row: A = tile, B = tile^T):
//     start = block of k0 + 2*(k0 within the block) + first row * W;  SBO = 8W (next 8 rows);
//     LBO unused (a k16 slice never leaves its block).
//   MN-major operand (the inner dimension runs down the tile: A = tile^T, B = tile):
//     start = k0 * W + block of the first M/N column;  SBO = 8W (next 8 rows of k);
//     LBO = bytes of one column block (next W/2 columns of M/N).
#pragma once

#include "compiler/passes/lower_tiles/TileLowering.h"

namespace flashbob::bob::lowering {

// The constant fields of a descriptor, and its start address (bytes) added at run time.
struct Descriptor {
  mlir::Value base; // i64: descriptor with start address 0 ... plus the tile's address
  mlir::Value at(Emitter &e, mlir::Value byteOffset) const;
  static mlir::Value constant(Emitter &e, int64_t v);
};

// The descriptor of `tile` (a converted shared tile in layout `l`), read K-major or MN-major.
Descriptor describe(Emitter &e, mlir::Value tile, const shared::Layout &l, bool kMajor);

// Byte offset of the k16 slice starting at k0 (and of M/N position mn0, a multiple of 64).
mlir::Value sliceOffset(Emitter &e, const shared::Layout &l, bool kMajor, int64_t k0,
                        mlir::Value mn0);

// Whether `op` accumulates into a splat of zeros: its first slice then ignores the
// accumulator registers (scale-d = 0) instead of having zeros moved into them.
bool startsFromZero(MmaOp op);

} // namespace flashbob::bob::lowering
