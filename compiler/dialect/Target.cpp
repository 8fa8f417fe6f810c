#include "compiler/dialect/Target.h"

namespace flashbob::bob {

namespace {
constexpr TargetInfo kTargets[] = {
    // arch           cc  hopper  per block  per SM
    {Arch::sm_80, 80, false, 166912, 167936},  // 163 KB / 164 KB
    {Arch::sm_86, 86, false, 101376, 102400},  // 99 KB / 100 KB
    {Arch::sm_89, 89, false, 101376, 102400},
    {Arch::sm_90, 90, false, 232448, 233472},  // 227 KB / 228 KB
    {Arch::sm_90a, 90, true, 232448, 233472},
};
} // namespace

llvm::ArrayRef<TargetInfo> allTargets() { return kTargets; }

const TargetInfo &targetInfo(Arch arch) {
  for (const TargetInfo &t : kTargets)
    if (t.arch == arch)
      return t;
  llvm_unreachable("every Arch has a row in kTargets");
}

std::optional<Arch> defaultArchFor(int major, int minor) {
  const int cc = major * 10 + minor;
  std::optional<Arch> best;
  // The row of this compute capability, preferring the one with arch-specific features.
  for (const TargetInfo &t : kTargets)
    if (t.computeCapability == cc && (!best || t.hopperFeatures))
      best = t.arch;
  return best;
}

} // namespace flashbob::bob
