#include "api/Attention.h"

#include "jit/FusedBackward.h"
#include "jit/HeadDims.h"
#include "jit/KernelCache.h"
#include "jit/Launch.h"
#include "jit/Validate.h"
#include "support/Errors.h"
#include "support/Progress.h"

#include "llvm/ADT/STLExtras.h"

#include <vector>

namespace flashbob {

namespace {
using kernels::Operand;
using Kind = bob::KernelKind;

// The kernels of each operation, in launch order: each reads what the one before wrote (bwd_q
// and bob_q write D, BoB's c and b; bwd_kv and bob_kv read them).
llvm::ArrayRef<Kind> kernelsOf(AttentionOp op) {
  static constexpr Kind forward[] = {Kind::fwd}, backward[] = {Kind::bwd_q, Kind::bwd_kv},
                        bob[] = {Kind::bob_q, Kind::bob_kv}, forwardJvp[] = {Kind::fwd_jvp},
                        forwardDual[] = {Kind::fwd_dual};
  switch (op) {
  case AttentionOp::forward: return forward;
  case AttentionOp::backward: return backward;
  case AttentionOp::bob: return bob;
  case AttentionOp::forward_jvp: return forwardJvp;
  case AttentionOp::bob_pass1: return llvm::ArrayRef(bob).take_front();
  case AttentionOp::bob_pass2: return llvm::ArrayRef(bob).drop_front();
  case AttentionOp::forward_dual: return forwardDual;
  }
  return {};
}

// Whether `op` on `p` runs the fused backward (jit/FusedBackward.h) on the current context's GPU
// instead of bwd_q and bwd_kv; it takes the same operands.
llvm::Expected<bool> runsFused(const AttentionProblem &p, AttentionOp op) {
  if (op != AttentionOp::backward || !jit::fusedBackwardEnabled())
    return false; // no GPU asked
  auto cache = jit::KernelCache::get();
  if (!cache)
    return cache.takeError();
  return jit::runsFusedBackward(p, (*cache)->arch());
}

// Checks every operand of every kernel of the operation, then launches the kernels in order on
// one stream.
llvm::Error run(const AttentionProblem &p, AttentionOp op, jit::Bindings bindings,
                CUstream stream) {
  llvm::ArrayRef<Kind> kinds = kernelsOf(op);
  // One GPU's bob_q finishes pass 1 itself (gQ, gdO, b): its unfinished outputs exist only in
  // the ring-step form.
  if (op == AttentionOp::bob_pass1 && !p.ringStep)
    return support::makeInvalidArgument(
        "ring_step", "flashbob: BoB's first pass alone is a ring step: set ring_step (the whole "
                     "of BoB on one GPU is one call, flashbob_bob)");
  // A ring needs pass 1's partials summed over every key shard before pass 2 can start.
  if (op == AttentionOp::bob && p.ringStep)
    return support::makeInvalidArgument(
        "ring_step", "flashbob: BoB's ring steps are its two passes apart (flashbob_bob_pass1, "
                     "flashbob_bob_pass2): pass 2 needs c and b summed over the whole ring");
  if (p.varlen) { // the packed batch's offsets are the problem's, operands of every kernel
    bindings.bind(Operand::cuSeqlensQ, RowVector{p.cuSeqlensQ});
    bindings.bind(Operand::cuSeqlensK, RowVector{p.cuSeqlensK});
  }
  if (llvm::Error e = jit::validate(p, kinds, bindings))
    return e;
  if (llvm::Error e = jit::validateOffsets(p, bindings, stream))
    return e;
  // The fused backward takes only head dims that need no padding (jit::runsFusedBackward):
  // the others keep bwd_q and bwd_kv, padded below.
  auto fused = runsFused(p, op);
  if (!fused)
    return fused.takeError();
  if (*fused) {
    if (llvm::Error e = jit::prepareKernels(p, jit::fusedBackwardKinds()))
      return e;
    return jit::launchFusedBackward(p, std::move(bindings), stream);
  }
  // A head dim the kernels take only through zero-padded copies (jit/HeadDims.h): they run on
  // the padded problem, between the copies.
  const bool copied = jit::headDimPadding(p) == jit::HeadDimPadding::copy;
  const AttentionProblem &kernelProblem = copied ? jit::paddedProblem(p) : p;
  // The operation's kernels compiled together on a first call (two cost the slower one), before
  // any memory is allocated for the copies.
  if (llvm::Error e = jit::prepareKernels(kernelProblem, kinds))
    return e;
  auto launchAll = [&](const AttentionProblem &problem, const jit::Bindings &b) -> llvm::Error {
    size_t step = 0;
    for (Kind kind : kinds) {
      support::KernelStep scope(++step, kinds.size()); // compilations say "(1/2)"
      if (llvm::Error e = jit::launch(kind, problem, b, stream))
        return e;
    }
    return llvm::Error::success();
  };
  if (copied)
    return jit::runOnPaddedCopies(p, kinds, bindings, stream, launchAll);
  return launchAll(p, bindings);
}
// BoB's inputs, as every BoB kernel takes them (a kernel's signature picks the ones it reads).
jit::Bindings bind(const BobInputs &in) {
  jit::Bindings b;
  b.bind(Operand::q, in.q).bind(Operand::k, in.k).bind(Operand::v, in.v).bind(Operand::o, in.o);
  b.bind(Operand::dO, in.dO).bind(Operand::lse, in.lse);
  b.bind(Operand::uQ, in.uQ).bind(Operand::uK, in.uK).bind(Operand::uV, in.uV);
  return b;
}
} // namespace

llvm::Error attentionForward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                             const Tensor &v, const Tensor &o, RowVector lse, CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, q).bind(Operand::k, k).bind(Operand::v, v).bind(Operand::o, o);
  b.bind(Operand::lse, lse);
  return run(p, AttentionOp::forward, b, stream);
}

llvm::Error attentionBackward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                              const Tensor &v, const Tensor &o, const Tensor &dO, RowVector lse,
                              const Tensor &dQ, const Tensor &dK, const Tensor &dV, RowVector dRow,
                              CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, q).bind(Operand::k, k).bind(Operand::v, v).bind(Operand::o, o);
  b.bind(Operand::dO, dO).bind(Operand::lse, lse).bind(Operand::D, dRow);
  b.bind(Operand::dQ, dQ).bind(Operand::dK, dK).bind(Operand::dV, dV);
  return run(p, AttentionOp::backward, b, stream);
}

llvm::Error attentionBob(const AttentionProblem &p, const BobInputs &in, const BobOutputs &out,
                         CUstream stream) {
  jit::Bindings b = bind(in);
  b.bind(Operand::gQ, out.gQ).bind(Operand::gK, out.gK).bind(Operand::gV, out.gV);
  b.bind(Operand::gdO, out.gdO);
  b.bind(Operand::D, out.dRow).bind(Operand::c, out.cRow).bind(Operand::b, out.bRow);
  return run(p, AttentionOp::bob, b, stream);
}

llvm::Error attentionBobPass1(const AttentionProblem &p, const BobInputs &in,
                              const BobPass1Outputs &out, CUstream stream) {
  jit::Bindings b = bind(in);
  b.bind(Operand::X1, out.x1).bind(Operand::X2, out.x2).bind(Operand::X3, out.x3);
  b.bind(Operand::X4, out.x4);
  b.bind(Operand::D, out.dRow).bind(Operand::c, out.cRow).bind(Operand::beta, out.betaRow);
  return run(p, AttentionOp::bob_pass1, b, stream);
}

llvm::Error attentionBobPass2(const AttentionProblem &p, const BobInputs &in,
                              const BobPass2Rows &rows, const Tensor &gK, const Tensor &gV,
                              CUstream stream) {
  jit::Bindings b = bind(in); // its O unread (bob_kv takes none)
  b.bind(Operand::D, rows.dRow).bind(Operand::c, rows.cRow).bind(Operand::b, rows.bRow);
  b.bind(Operand::gK, gK).bind(Operand::gV, gV);
  return run(p, AttentionOp::bob_pass2, b, stream);
}

llvm::Error attentionForwardJvp(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                                const Tensor &v, const Tensor &o, RowVector lse, const Tensor &tQ,
                                const Tensor &tK, const Tensor &tV, const Tensor &tO,
                                CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, q).bind(Operand::k, k).bind(Operand::v, v).bind(Operand::o, o);
  b.bind(Operand::lse, lse).bind(Operand::tQ, tQ).bind(Operand::tK, tK).bind(Operand::tV, tV);
  b.bind(Operand::tO, tO);
  return run(p, AttentionOp::forward_jvp, b, stream);
}

llvm::Error attentionForwardDual(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                                 const Tensor &v, const Tensor &tQ, const Tensor &tK,
                                 const Tensor &tV, const Tensor &o, RowVector lse,
                                 const Tensor &tO, CUstream stream) {
  jit::Bindings b;
  b.bind(Operand::q, q).bind(Operand::k, k).bind(Operand::v, v);
  b.bind(Operand::tQ, tQ).bind(Operand::tK, tK).bind(Operand::tV, tV);
  b.bind(Operand::o, o).bind(Operand::lse, lse).bind(Operand::tO, tO);
  return run(p, AttentionOp::forward_dual, b, stream);
}

llvm::Error attentionPrecompile(const AttentionProblem &p, llvm::ArrayRef<AttentionOp> ops) {
  std::vector<Kind> kinds;
  for (AttentionOp op : ops) {
    if (kernelsOf(op).empty())
      return support::makeInvalidArgument(
          "op", "flashbob: op must be forward, backward, bob, forward_jvp, bob_pass1, "
                "bob_pass2 or forward_dual");
    auto fused = runsFused(p, op);
    if (!fused)
      return fused.takeError();
    llvm::append_range(kinds, *fused ? jit::fusedBackwardKinds() : kernelsOf(op));
  }
  return jit::precompile(p, kinds);
}

} // namespace flashbob
