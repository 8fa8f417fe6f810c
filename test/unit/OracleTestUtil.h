// Helpers shared by the oracle's tests (OracleTest.cpp, RingOracleTest.cpp): random inputs, the
// normwise relative error every check bounds, and a problem's description for INFO.
#pragma once

#include "kernels/oracle/Oracle.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace flashbob::oracle::testing {

inline Matrix randomMatrix(Index rows, Index cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Matrix m(rows, cols);
  for (double& x : m.data) x = u(rng);
  return m;
}

struct Inputs {
  Matrix Q, K, V, dO, uQ, uK, uV;
};

inline Inputs randomInputs(const Problem& p, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in;
  in.Q = randomMatrix(p.N, p.d, rng);
  in.K = randomMatrix(p.M, p.d, rng);
  in.V = randomMatrix(p.M, p.valueDim(), rng);
  in.dO = randomMatrix(p.N, p.valueDim(), rng);
  in.uQ = randomMatrix(p.N, p.d, rng);
  in.uK = randomMatrix(p.M, p.d, rng);
  in.uV = randomMatrix(p.M, p.valueDim(), rng);
  return in;
}

// Normwise relative error used throughout: max |got - want| / max |want|  (max abs error when
// want is all zero). Infinite entries (L of fully masked rows) must match exactly and are
// left out of both maxima.
inline double relErr(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double err = 0, scale = 0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    if (std::isinf(want[k]) || std::isinf(got[k])) {
      CHECK(got[k] == want[k]);
      continue;
    }
    err = std::max(err, std::abs(got[k] - want[k]));
    scale = std::max(scale, std::abs(want[k]));
  }
  return scale > 0 ? err / scale : err;
}
inline double relErr(const Matrix& got, const Matrix& want) {
  REQUIRE(got.rows == want.rows);
  REQUIRE(got.cols == want.cols);
  return relErr(got.data, want.data);
}

inline std::string describe(const Problem& p) {
  std::string window;
  if (p.windowLeft >= 0 || p.windowRight >= 0)
    window = " window (" + std::to_string(p.windowLeft) + ", " + std::to_string(p.windowRight) + ")";
  const std::string dv = p.valueDim() != p.d ? " dv=" + std::to_string(p.valueDim()) : "";
  return "N=" + std::to_string(p.N) + " M=" + std::to_string(p.M) + " d=" + std::to_string(p.d) +
         dv + (p.causal ? " causal" : " full") + window;
}

// `p` with the sliding window (left, right).
inline Problem windowed(Problem p, Index left, Index right) {
  p.windowLeft = left;
  p.windowRight = right;
  return p;
}

}  // namespace flashbob::oracle::testing
