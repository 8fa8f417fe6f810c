#include "kernels/Signature.h"

#include "llvm/Support/ErrorHandling.h"

#include <cassert>
#include <iterator>

namespace flashbob::kernels {

namespace {
constexpr Operand q = Operand::q, k = Operand::k, v = Operand::v, o = Operand::o,
                  dO = Operand::dO, lse = Operand::lse, dQ = Operand::dQ, dK = Operand::dK,
                  dV = Operand::dV, D = Operand::D, c = Operand::c, b = Operand::b,
                  uQ = Operand::uQ, uK = Operand::uK, uV = Operand::uV, gQ = Operand::gQ,
                  gK = Operand::gK, gV = Operand::gV, gdO = Operand::gdO, tQ = Operand::tQ,
                  tK = Operand::tK, tV = Operand::tV, tO = Operand::tO;
constexpr Layout T = Layout::tensor, R = Layout::rows;
constexpr Side Q = Side::query, K = Side::key;

constexpr OperandInfo kOperands[] = {
    {q, "q", T, Q},     {k, "k", T, K},     {v, "v", T, K},     {o, "o", T, Q},
    {dO, "dO", T, Q},   {lse, "lse", R, Q}, {dQ, "dQ", T, Q},   {dK, "dK", T, K},
    {dV, "dV", T, K},   {D, "D", R, Q},     {c, "c", R, Q},     {b, "b", R, Q},
    {uQ, "uQ", T, Q},   {uK, "uK", T, K},   {uV, "uV", T, K},   {gQ, "gQ", T, Q},
    {gK, "gK", T, K},   {gV, "gV", T, K},   {gdO, "gdO", T, Q}, {tQ, "tQ", T, Q},
    {tK, "tK", T, K},   {tV, "tV", T, K},   {tO, "tO", T, Q},
};
static_assert(std::size(kOperands) == kOperandCount);

constexpr bool in = false, out = true;
constexpr Param kForward[] = {{q, in}, {k, in}, {v, in}, {o, out}, {lse, out}};
constexpr Param kBackwardQuery[] = {{q, in},   {k, in},   {v, in},  {o, in},
                                    {dO, in},  {lse, in}, {dQ, out}, {D, out}};
constexpr Param kBackwardKeyValue[] = {{q, in},   {k, in}, {v, in},  {dO, in},
                                       {lse, in}, {D, in}, {dK, out}, {dV, out}};
constexpr Param kBobQuery[] = {{q, in},   {k, in},    {v, in},  {o, in},  {dO, in},
                               {lse, in}, {uQ, in},   {uK, in}, {uV, in}, {gQ, out},
                               {gdO, out}, {D, out},  {c, out}, {b, out}};
constexpr Param kBobKeyValue[] = {{q, in}, {k, in},  {v, in},  {dO, in}, {lse, in},
                                  {D, in}, {c, in},  {b, in},  {uQ, in}, {uK, in},
                                  {uV, in}, {gK, out}, {gV, out}};
constexpr Param kForwardJvp[] = {{q, in},  {k, in},  {v, in},  {o, in}, {lse, in},
                                 {tQ, in}, {tK, in}, {tV, in}, {tO, out}};
} // namespace

const OperandInfo &operandInfo(Operand operand) {
  const OperandInfo &info = kOperands[static_cast<size_t>(operand)];
  assert(info.operand == operand && "kOperands is in enum order");
  return info;
}

llvm::ArrayRef<Param> signature(bob::KernelKind kind) {
  switch (kind) {
  case bob::KernelKind::fwd: return kForward;
  case bob::KernelKind::bwd_q: return kBackwardQuery;
  case bob::KernelKind::bwd_kv: return kBackwardKeyValue;
  case bob::KernelKind::bob_q: return kBobQuery;
  case bob::KernelKind::bob_kv: return kBobKeyValue;
  case bob::KernelKind::fwd_jvp: return kForwardJvp;
  }
  llvm_unreachable("every kernel kind has a signature");
}

int argumentIndex(bob::KernelKind kind, Operand operand) {
  llvm::ArrayRef<Param> params = signature(kind);
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].operand == operand)
      return static_cast<int>(i);
  return -1;
}

} // namespace flashbob::kernels
