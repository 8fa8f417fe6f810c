#include "api/Attention.h"

#include "jit/Launch.h"
#include "support/Errors.h"
#include "support/Progress.h"

namespace flashbob {

namespace {
using kernels::Operand;
using Kind = bob::KernelKind;

// Checks every operand of every kernel of the operation, then launches the kernels in order on
// one stream (each reads what the one before wrote).
llvm::Error run(const AttentionProblem &p, std::initializer_list<Kind> kinds,
                jit::Bindings bindings, CUstream stream) {
  if (p.varlen) { // the packed batch's offsets are the problem's, operands of every kernel
    bindings.bind(Operand::cuSeqlensQ, RowVector{p.cuSeqlensQ});
    bindings.bind(Operand::cuSeqlensK, RowVector{p.cuSeqlensK});
  }
  if (llvm::Error e = jit::validate(p, kinds, bindings))
    return e;
  if (llvm::Error e = jit::validateOffsets(p, bindings, stream))
    return e;
  size_t step = 0;
  for (Kind kind : kinds) {
    support::KernelStep scope(++step, kinds.size()); // compilations say "(1/2)"
    if (llvm::Error e = jit::launch(kind, p, bindings, stream))
      return e;
  }
  return llvm::Error::success();
}
} // namespace

llvm::Error attentionForward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                             const Tensor &v, const Tensor &o, RowVector lse, CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, q).bind(Operand::k, k).bind(Operand::v, v).bind(Operand::o, o);
  b.bind(Operand::lse, lse);
  return run(p, {Kind::fwd}, b, stream);
}

llvm::Error attentionBackward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                              const Tensor &v, const Tensor &o, const Tensor &dO, RowVector lse,
                              const Tensor &dQ, const Tensor &dK, const Tensor &dV, RowVector dRow,
                              CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, q).bind(Operand::k, k).bind(Operand::v, v).bind(Operand::o, o);
  b.bind(Operand::dO, dO).bind(Operand::lse, lse).bind(Operand::D, dRow);
  b.bind(Operand::dQ, dQ).bind(Operand::dK, dK).bind(Operand::dV, dV);
  // bwd_q writes D, which bwd_kv reads.
  return run(p, {Kind::bwd_q, Kind::bwd_kv}, b, stream);
}

llvm::Error attentionBob(const AttentionProblem &p, const BobInputs &in, const BobOutputs &out,
                         CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, in.q).bind(Operand::k, in.k).bind(Operand::v, in.v).bind(Operand::o, in.o);
  b.bind(Operand::dO, in.dO).bind(Operand::lse, in.lse);
  b.bind(Operand::uQ, in.uQ).bind(Operand::uK, in.uK).bind(Operand::uV, in.uV);
  b.bind(Operand::gQ, out.gQ).bind(Operand::gK, out.gK).bind(Operand::gV, out.gV);
  b.bind(Operand::gdO, out.gdO);
  b.bind(Operand::D, out.dRow).bind(Operand::c, out.cRow).bind(Operand::b, out.bRow);
  // Pass 1 writes D, c, b; pass 2 reads them.
  return run(p, {Kind::bob_q, Kind::bob_kv}, b, stream);
}

llvm::Error attentionForwardJvp(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                                const Tensor &v, const Tensor &o, RowVector lse, const Tensor &tQ,
                                const Tensor &tK, const Tensor &tV, const Tensor &tO,
                                CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, q).bind(Operand::k, k).bind(Operand::v, v).bind(Operand::o, o);
  b.bind(Operand::lse, lse).bind(Operand::tQ, tQ).bind(Operand::tK, tK).bind(Operand::tV, tV);
  b.bind(Operand::tO, tO);
  return run(p, {Kind::fwd_jvp}, b, stream);
}

llvm::Error attentionPrecompile(const AttentionProblem &p, AttentionOp op) {
  switch (op) {
  case AttentionOp::forward:
    return jit::precompile(p, {Kind::fwd});
  case AttentionOp::backward:
    return jit::precompile(p, {Kind::bwd_q, Kind::bwd_kv});
  case AttentionOp::bob:
    return jit::precompile(p, {Kind::bob_q, Kind::bob_kv});
  case AttentionOp::forward_jvp:
    return jit::precompile(p, {Kind::fwd_jvp});
  }
  return support::makeInvalidArgument("op", "flashbob: op must be forward, backward, bob or forward_jvp");
}

} // namespace flashbob
