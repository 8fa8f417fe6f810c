#include "kernels/Signature.h"

#include "llvm/Support/ErrorHandling.h"

#include <array>
#include <cassert>
#include <cmath>
#include <iterator>
#include <vector>

namespace flashbob::kernels {

namespace {
constexpr Operand q = Operand::q, k = Operand::k, v = Operand::v, o = Operand::o,
                  dO = Operand::dO, lse = Operand::lse, dQ = Operand::dQ, dK = Operand::dK,
                  dV = Operand::dV, D = Operand::D, c = Operand::c, b = Operand::b,
                  uQ = Operand::uQ, uK = Operand::uK, uV = Operand::uV, gQ = Operand::gQ,
                  gK = Operand::gK, gV = Operand::gV, gdO = Operand::gdO, tQ = Operand::tQ,
                  tK = Operand::tK, tV = Operand::tV, tO = Operand::tO,
                  cuQ = Operand::cuSeqlensQ, cuK = Operand::cuSeqlensK, X1 = Operand::X1,
                  X2 = Operand::X2, X3 = Operand::X3, X4 = Operand::X4, beta = Operand::beta,
                  dQaccum = Operand::dQaccum, dQsem = Operand::dQsemaphores;
constexpr Layout T = Layout::tensor, R = Layout::rows, C = Layout::offsets, S = Layout::sums,
                 N = Layout::counters;
constexpr Side Q = Side::query, K = Side::key;
// X1..X3 are sums of tiles times K or uK, X4 of tiles times V or uV (docs/bob-math.md).
constexpr Width W = Width::scores, V = Width::values;

constexpr OperandInfo kOperands[] = {
    {q, "q", T, Q, W},      {k, "k", T, K, W},      {v, "v", T, K, V},
    {o, "o", T, Q, V},      {dO, "dO", T, Q, V},    {lse, "lse", R, Q, W},
    {dQ, "dQ", T, Q, W},    {dK, "dK", T, K, W},    {dV, "dV", T, K, V},
    {D, "D", R, Q, W},      {c, "c", R, Q, W},      {b, "b", R, Q, W},
    {uQ, "uQ", T, Q, W},    {uK, "uK", T, K, W},    {uV, "uV", T, K, V},
    {gQ, "gQ", T, Q, W},    {gK, "gK", T, K, W},    {gV, "gV", T, K, V},
    {gdO, "gdO", T, Q, V},  {tQ, "tQ", T, Q, W},    {tK, "tK", T, K, W},
    {tV, "tV", T, K, V},    {tO, "tO", T, Q, V},
    {cuQ, "cu_seqlens_q", C, Q, W}, {cuK, "cu_seqlens_k", C, K, W},
    {X1, "X1", T, Q, W},    {X2, "X2", T, Q, W},    {X3, "X3", T, Q, W},
    {X4, "X4", T, Q, V},    {beta, "beta", R, Q, W},
    {dQaccum, "dQ_accum", S, Q, W}, {dQsem, "dQ_semaphores", N, Q, W},
};
static_assert(std::size(kOperands) == kOperandCount);

constexpr ScalarInfo kScalars[] = {
    {Scalar::scale, "scale"},
    {Scalar::scaleLog2e, "scale * log2(e)"},
};
static_assert(std::size(kScalars) == kScalarCount);

constexpr Param in(Operand o) { return {false, o, Scalar{}, false}; }
constexpr Param out(Operand o) { return {false, o, Scalar{}, true}; }
constexpr Param f32(Scalar s) { return {true, Operand{}, s, false}; }
constexpr Param s = f32(Scalar::scale), sLog2e = f32(Scalar::scaleLog2e);

constexpr Param kForward[] = {in(q), in(k), in(v), out(o), out(lse), sLog2e};
constexpr Param kBackwardQuery[] = {in(q),  in(k),   in(v),   in(o), in(dO),
                                    in(lse), out(dQ), out(D), s,     sLog2e};
constexpr Param kBackwardKeyValue[] = {in(q),   in(k),  in(v),   in(dO),  in(lse),
                                       in(D),   out(dK), out(dV), s,       sLog2e};
constexpr Param kBobQuery[] = {in(q),   in(k),   in(v),   in(o),   in(dO), in(lse),
                               in(uQ),  in(uK),  in(uV),  out(gQ), out(gdO), out(D),
                               out(c),  out(b),  s,       sLog2e};
constexpr Param kBobKeyValue[] = {in(q),   in(k),   in(v),  in(dO), in(lse), in(D),
                                  in(c),   in(b),   in(uQ), in(uK), in(uV),  out(gK),
                                  out(gV), s,       sLog2e};
constexpr Param kForwardJvp[] = {in(q),  in(k),  in(v),  in(o),   in(lse), in(tQ),
                                 in(tK), in(tV), out(tO), s,      sLog2e};
constexpr Param kForwardDual[] = {in(q),  in(k),   in(v),  in(tQ), in(tK), in(tV),
                                  out(o), out(lse), out(tO), s,     sLog2e};
constexpr Param kBobQueryPartial[] = {in(q),   in(k),   in(v),   in(o),   in(dO), in(lse),
                                      in(uQ),  in(uK),  in(uV),  out(X1), out(X2), out(X3),
                                      out(X4), out(D),  out(c),  out(beta), s,    sLog2e};

constexpr Param kBackwardDot[] = {in(o), in(dO), out(D)};
constexpr Param kBackwardFused[] = {in(q),   in(k),   in(v),       in(dO),        in(lse),
                                    in(D),   out(dK), out(dV),     out(dQaccum), out(dQsem),
                                    s,       sLog2e};
constexpr Param kBackwardDQ[] = {in(dQaccum), out(dQ), s};

// Every operand before every scalar (signature's promise).
template <size_t N> constexpr bool operandsFirst(const Param (&params)[N]) {
  for (size_t i = 1; i < N; ++i)
    if (params[i - 1].isScalar && !params[i].isScalar)
      return false;
  return true;
}
static_assert(operandsFirst(kForward) && operandsFirst(kBackwardQuery) &&
              operandsFirst(kBackwardKeyValue) && operandsFirst(kBobQuery) &&
              operandsFirst(kBobKeyValue) && operandsFirst(kForwardJvp) &&
              operandsFirst(kForwardDual) && operandsFirst(kBobQueryPartial) &&
              operandsFirst(kBackwardDot) && operandsFirst(kBackwardFused) &&
              operandsFirst(kBackwardDQ));
} // namespace

const ScalarInfo &scalarInfo(Scalar scalar) {
  const ScalarInfo &info = kScalars[static_cast<size_t>(scalar)];
  assert(info.scalar == scalar && "kScalars is in enum order");
  return info;
}

float scalarValue(Scalar scalar, double scale) {
  switch (scalar) {
  case Scalar::scale: return static_cast<float>(scale);
  case Scalar::scaleLog2e: return static_cast<float>(scale * kLog2e);
  }
  llvm_unreachable("every scalar has a value");
}

double defaultScale(int64_t headDim) { return 1.0 / std::sqrt(static_cast<double>(headDim)); }

bool isDefaultScale(double scale, int64_t headDim) {
  for (const ScalarInfo &info : kScalars)
    if (scalarValue(info.scalar, scale) != scalarValue(info.scalar, defaultScale(headDim)))
      return false;
  return true;
}

const OperandInfo &operandInfo(Operand operand) {
  const OperandInfo &info = kOperands[static_cast<size_t>(operand)];
  assert(info.operand == operand && "kOperands is in enum order");
  return info;
}

namespace {
llvm::ArrayRef<Param> denseSignature(bob::KernelKind kind, bool partial) {
  if (partial && kind == bob::KernelKind::bob_q)
    return kBobQueryPartial;
  switch (kind) {
  case bob::KernelKind::fwd: return kForward;
  case bob::KernelKind::bwd_q: return kBackwardQuery;
  case bob::KernelKind::bwd_kv: return kBackwardKeyValue;
  case bob::KernelKind::bob_q: return kBobQuery;
  case bob::KernelKind::bob_kv: return kBobKeyValue;
  case bob::KernelKind::fwd_jvp: return kForwardJvp;
  case bob::KernelKind::fwd_dual: return kForwardDual;
  case bob::KernelKind::bwd_dot: return kBackwardDot;
  case bob::KernelKind::bwd_fused: return kBackwardFused;
  case bob::KernelKind::bwd_dq: return kBackwardDQ;
  }
  llvm_unreachable("every kernel kind has a signature");
}

// The dense signature with the two offsets between its operands and its scalars (last, for a
// kind without scalars).
std::vector<Param> withOffsets(llvm::ArrayRef<Param> dense) {
  std::vector<Param> params;
  bool added = false;
  for (const Param &p : dense) {
    if (p.isScalar && !added) {
      params.push_back(in(cuQ));
      params.push_back(in(cuK));
      added = true;
    }
    params.push_back(p);
  }
  if (!added) {
    params.push_back(in(cuQ));
    params.push_back(in(cuK));
  }
  return params;
}
} // namespace

llvm::ArrayRef<Param> signature(bob::KernelKind kind, bool varlen, bool partial) {
  if (!varlen)
    return denseSignature(kind, partial);
  constexpr size_t kinds = bob::getMaxEnumValForKernelKind() + 1;
  static const auto varlenSignatures = [] {
    std::array<std::vector<Param>, 2 * kinds> all; // [partial][kind]
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = withOffsets(denseSignature(static_cast<bob::KernelKind>(i % kinds), i >= kinds));
    return all;
  }();
  return varlenSignatures[(partial ? kinds : 0) + static_cast<size_t>(kind)];
}

bool readsKeys(bob::KernelKind kind) {
  return llvm::any_of(signature(kind, /*varlen=*/false), [](const Param &p) {
    return !p.isScalar && operandInfo(p.operand).side == Side::key;
  });
}

bool takesScalars(bob::KernelKind kind) {
  return llvm::any_of(signature(kind, /*varlen=*/false), [](const Param &p) { return p.isScalar; });
}

size_t operandCount(bob::KernelKind kind, bool varlen, bool partial) {
  return llvm::count_if(signature(kind, varlen, partial),
                        [](const Param &p) { return !p.isScalar; });
}

int argumentIndex(bob::KernelKind kind, bool varlen, Operand operand, bool partial) {
  llvm::ArrayRef<Param> params = signature(kind, varlen, partial);
  for (size_t i = 0; i < params.size(); ++i)
    if (!params[i].isScalar && params[i].operand == operand)
      return static_cast<int>(i);
  return -1;
}

} // namespace flashbob::kernels
