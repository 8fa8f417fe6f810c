// The first backward fused into one key-major kernel, FlashAttention-3's structure (sm_90a):
//   bwd_dot   (query-major): D = rowsum(dO o O);
//   bwd_fused (key-major):   for each query block its sweep visits, P^T and dS^T recomputed as
//                            in bwd_kv, dV += P^T dO and dK += dS^T Q in registers, and dQ's part
//                            dS K (from dS^T in shared memory, read transposed), added into the
//                            f32 sum dQaccum in global memory;
//   bwd_dq    (query-major): dQ = s dQaccum, in the input type.
// Five products per (query block, key block) pair instead of the seven of bwd_q and bwd_kv,
// which recompute S and dP on both sides.
//
// dQ stays deterministic: the key blocks that see a query block add their parts into it one at
// a time, in the order of their turns (KernelBuilder::keyBlocksLastFirst), through a counter
// per (batch, query head, query block) that the caller zeroes: wait until it equals the block's
// turn, add (bulk reductions), wait until the additions are performed, pass the turn on. Every
// run then adds the same f32 parts in the same order.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include "compiler/passes/WgmmaRules.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace flashbob::kernels {

namespace {
// This key block's turn at the query block starting at `query0`: its place among the key
// blocks that see the query block, [firstKeyBlock, keyBlocksToVisit) (AttentionTiles.h, the
// same bounds the sweeps use), counted from the last of them down or from the first up.
Value turnAt(KernelBuilder &kb, Value query0, Value keyBlock) {
  auto &b = kb.b;
  if (kb.keyBlocksLastFirst()) {
    Value end = keyBlocksToVisit(kb, query0, kb.n, kb.m);
    return arith::SubIOp::create(b, arith::SubIOp::create(b, end, kb.index(1)), keyBlock);
  }
  return arith::SubIOp::create(b, keyBlock, firstKeyBlock(kb, query0, kb.n, kb.m));
}
} // namespace

void buildBackwardDot(KernelBuilder &kb) {
  kb.beginKernel();
  Tile dRow = outputDotRows(kb);
  kb.storeOwnRows(dRow, Operand::D);
}

void buildBackwardFused(KernelBuilder &kb) {
  const int64_t bn = kb.ownRows(), bm = kb.sweptRows(), d = kb.headDim();
  const bob::SpecAttr attr = kb.spec.toAttr(kb.b.getContext());
  // dK's product may read dS^T from registers (register_a); dQ's reads it transposed, which
  // only a shared tile can give.
  const bool dSInRegisters = bob::wgmma::registerAccumulatorFits(kb.rtile(bn, d), attr);
  kb.beginKernel();
  // The kernel's own shared tiles before the staged ones: a producer kernel's roles split
  // after the last of them (bob-pipeline-loads).
  Value dSTs = kb.scratch(bn, bm);       // dS^T in the input type
  Value dQStaged = kb.sumsTile(bm, d);   // dQ's part of a pair, f32, for the bulk reductions
  kb.stage({Operand::k, Operand::v}, {Operand::q, Operand::dO});
  Value ks = kb.shared(Operand::k), vs = kb.shared(Operand::v);
  Value qs = kb.shared(Operand::q), dOs = kb.shared(Operand::dO);
  Value keyBlock = arith::DivUIOp::create(kb.b, kb.ownStart, kb.index(bn));

  Tile zero = kb.splat(kb.rtile(bn, d), 0);
  Value dKReserve = kb.reserve(zero), dVReserve = kb.reserve(zero);
  auto final = tiles(kb, kb.sweep({zero, zero}, [&](Value query0, ValueRange carried) {
    auto in = tiles(kb, carried);
    Tile dK = in[0], dV = in[1];
    auto [pT, dST] = backwardTilesT(kb, ks, vs, qs, dOs, query0);
    // Stored before the products so that P^T's staging store (bob-stage-operands, before dV's
    // product) joins it: one barrier pair for both.
    kb.storeInto(dST, dSTs);
    dV = accumulate(dV, pT, dOs);
    dK = dSInRegisters ? accumulate(dK, dST, qs) : accumulate(dK, dSTs, qs);
    Tile dQPart = transposedProduct(kb, dSTs, ks); // dS K: this key block's part of dQ / s
    kb.storeInto(dQPart, dQStaged);
    // Add it into dQaccum in this key block's turn; the next block's turn starts once the
    // additions are performed (not only read), so it adds after them.
    Value queryBlock = arith::DivUIOp::create(kb.b, query0, kb.index(bm));
    kb.waitForTurn(Operand::dQsemaphores, queryBlock, turnAt(kb, query0, keyBlock));
    kb.addIntoSweptRows(dQStaged, Operand::dQaccum, query0);
    kb.waitForBulk();
    kb.passTurn(Operand::dQsemaphores, queryBlock);
    dK = kb.flush(dK, dKReserve);
    dV = kb.flush(dV, dVReserve);
    return values({dK, dV});
  }));
  Tile dK = kb.withReserve(final[0], dKReserve);
  Tile dV = kb.withReserve(final[1], dVReserve);
  // K's and V's tiles are free now: dK and dV leave through them.
  kb.storeOwn(dK * kb.scale(), Operand::dK, /*through=*/Operand::k);
  kb.storeOwn(dV, Operand::dV, /*through=*/Operand::v);
}

void buildBackwardDQ(KernelBuilder &kb) {
  kb.beginKernel();
  Tile sum = kb.loadOwn(Operand::dQaccum);
  kb.storeOwn(sum * kb.scale(), Operand::dQ);
}

} // namespace flashbob::kernels
