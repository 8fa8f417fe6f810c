// The tiled models' building blocks (TiledModel.cpp, ScoreModTiled.cpp): a tile, its fixed
// scratch buffer, and the three tile products a kernel runs as MMAs. Internal to the oracle.
#pragma once

#include "kernels/oracle/Oracle.h"

#include <algorithm>
#include <vector>

namespace flashbob::oracle::detail::tiles {

inline std::size_t at(Index i) { return static_cast<std::size_t>(i); }

// One tile: query rows [i0, i1) and key rows [j0, j1). Edge tiles are smaller than the block
// sizes when the blocks do not divide N or M.
struct Tile {
  Index i0, i1, j0, j1;
  Index rows() const { return i1 - i0; }
  Index cols() const { return j1 - j0; }
};

// A block_m x block_n tile buffer with a fixed row stride, reused for every tile (like a
// register / shared-memory tile). Sized by min(block, problem size): a tile never exceeds it.
struct TileBuf {
  Index ld;
  std::vector<double> v;
  TileBuf(const Problem& p, const Tiling& t)
      : ld(std::min(t.block_n, p.M)), v(at(std::min(t.block_m, p.N) * ld), 0.0) {}
  double& operator()(Index r, Index c) { return v[at(r * ld + c)]; }
  double operator()(Index r, Index c) const { return v[at(r * ld + c)]; }
};

// Per-block accumulator: rows x d (or dv), zeroed at the start of each block.
inline Matrix zeroAcc(Index rows, Index d) { return Matrix(rows, d, 0.0); }

inline void count(TileStats* stats) {
  if (stats) ++stats->tiles;
}

// T = alpha * A[i0:i1] B[j0:j1]^T        (an MMA with inner dimension A's width: d, or dv for
//                                         dO V^T and dO uV^T)
inline void tileABt(const Tile& t, const Matrix& A, const Matrix& B, double alpha, TileBuf& T) {
  for (Index r = 0; r < t.rows(); ++r) {
    const double* a = A.row(t.i0 + r);
    for (Index c = 0; c < t.cols(); ++c) {
      const double* bRow = B.row(t.j0 + c);
      double acc = 0;
      for (Index k = 0; k < A.cols; ++k) acc += a[k] * bRow[k];
      T(r, c) = alpha * acc;
    }
  }
}

// acc (tile rows x B's width) += alpha * T B[j0:j1]        (query-side accumulation)
inline void accTB(const Tile& t, const TileBuf& T, const Matrix& B, double alpha, Matrix& acc) {
  for (Index r = 0; r < t.rows(); ++r) {
    double* out = acc.row(r);
    for (Index c = 0; c < t.cols(); ++c) {
      const double w = alpha * T(r, c);
      const double* bRow = B.row(t.j0 + c);
      for (Index k = 0; k < B.cols; ++k) out[k] += w * bRow[k];
    }
  }
}

// acc (tile cols x A's width) += alpha * T^T A[i0:i1]      (key-side accumulation)
inline void accTtA(const Tile& t, const TileBuf& T, const Matrix& A, double alpha, Matrix& acc) {
  for (Index r = 0; r < t.rows(); ++r) {
    const double* aRow = A.row(t.i0 + r);
    for (Index c = 0; c < t.cols(); ++c) {
      const double w = alpha * T(r, c);
      double* out = acc.row(c);
      for (Index k = 0; k < A.cols; ++k) out[k] += w * aRow[k];
    }
  }
}

}  // namespace flashbob::oracle::detail::tiles
