// How far a result is from the oracle: the one error measure every check in the project reports
// (tests, `flashbob run --check`, the demo).
#pragma once

#include <cstddef>
#include <vector>

namespace flashbob::oracle {

struct ErrorStats {
  double relL2 = 0;      // ||got - ref|| / ||ref|| (||got - ref|| when ref is all zero)
  size_t nonFinite = 0;  // NaN, or an infinity where the reference has another value
};

// Positions where both hold the same infinity (L of a fully masked row) count as equal.
ErrorStats compare(const std::vector<double>& got, const std::vector<double>& ref);

}  // namespace flashbob::oracle
