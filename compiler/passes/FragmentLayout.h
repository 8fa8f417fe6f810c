// Where each element of a register tile lives: the one place that knows the mma.sync m16n8k16
// fragment layout. Pure index arithmetic, shared by the lowering patterns.
//
// A register tile R x C is split by rows across the W warps of the block: warp w owns rows
// [w*R/W, (w+1)*R/W), i.e. MF = R/(16W) fragments of 16 rows. Within a warp, lane l has
// g = l/4 ("group", 0..7) and t = l%4 ("thread in group").
//
// With G column groups (spec warp_cols = G > 1) the W warps form G groups of W' = W/G
// consecutive warps: warp w is row warp w % W' of column group w / W', owns rows
// [(w%W')*R/W', ...) and columns [(w/W')*C/G, ...): MF = R/(16W'), NF = C/(8G). Everything
// below then describes the warp's own R/W' x C/G part (column offsets are relative to its
// first column). Row vectors are held, identical, by every group.
//
// f32 tile (accumulator layout, PTX "C/D fragment" of m16n8): NF = C/8 column fragments;
// thread holds 4 values per (mi, ni):
//   e = 0: (row g,     col 2t)    e = 1: (row g,     col 2t+1)
//   e = 2: (row g + 8, col 2t)    e = 3: (row g + 8, col 2t+1)
// flattened as index (mi*NF + ni)*4 + e.
//
// bf16/f16 tile (A-operand layout, m16k16): the same elements in the same order, two per i32
// register: register (mi*KF + kf)*4 + r (KF = C/16) holds the pair e = 2(r%2), 2(r%2)+1 of
// fragment ni = 2kf + r/2. This is exactly the A fragment (a0: row g, k 2t..; a1: row g+8;
// a2: row g, k 2t+8..; a3: row g+8, k 2t+8..), which is why converting P to bf16 makes it the A
// operand of P*V without any data movement (FlashAttention-2's register reuse).
//
// Row vector of R: index mi*2 + h holds row g + 8h of fragment mi (all 4 threads of a group hold
// the same values). Column vector of C: index ni*2 + e holds column 8ni + 2t + e.
#pragma once

#include <cstdint>

namespace flashbob::bob::layout {

struct TileShape {
  int64_t rows, cols, warps, warpCols = 1;

  int64_t rowWarps() const { return warps / warpCols; }
  int64_t rowsPerWarp() const { return rows / rowWarps(); }
  int64_t colsPerWarp() const { return cols / warpCols; }
  int64_t mFrags() const { return rowsPerWarp() / 16; }
  int64_t nFrags() const { return colsPerWarp() / 8; }
  int64_t kFrags() const { return colsPerWarp() / 16; }

  // Per-thread element counts of each representation.
  int64_t accSize() const { return mFrags() * nFrags() * 4; }     // f32 values
  int64_t operandSize() const { return mFrags() * kFrags() * 4; } // i32 (2 x bf16/f16) values
  int64_t rowVecSize() const { return mFrags() * 2; }
  int64_t colVecSize() const { return nFrags() * 2; }

  int64_t accIndex(int64_t mi, int64_t ni, int64_t e) const { return (mi * nFrags() + ni) * 4 + e; }
  int64_t operandIndex(int64_t mi, int64_t kf, int64_t r) const {
    return (mi * kFrags() + kf) * 4 + r;
  }
  static int64_t rowVecIndex(int64_t mi, int64_t h) { return mi * 2 + h; }
  static int64_t colVecIndex(int64_t ni, int64_t e) { return ni * 2 + e; }

  // Offsets of element (mi, ni, e) from the thread's base row (warp*R/W + g) and base column (2t).
  static int64_t rowOffset(int64_t mi, int64_t e) { return mi * 16 + 8 * (e / 2); }
  static int64_t colOffset(int64_t ni, int64_t e) { return ni * 8 + (e % 2); }
};

} // namespace flashbob::bob::layout
