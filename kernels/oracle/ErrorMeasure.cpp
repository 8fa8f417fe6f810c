#include "kernels/oracle/ErrorMeasure.h"

#include <cmath>

namespace flashbob::oracle {

ErrorStats compare(const std::vector<double>& got, const std::vector<double>& ref) {
  ErrorStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (std::isinf(ref[i]) && got[i] == ref[i])
      continue;
    if (!std::isfinite(got[i])) {
      ++s.nonFinite;
      continue;
    }
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  s.relL2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

}  // namespace flashbob::oracle
