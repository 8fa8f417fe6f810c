// How a kernel with a producer warpgroup (`producer` specs) shares the SM's registers between
// its warpgroups: ptxas compiles every thread for the register count at entry (65536 divided by
// the threads of the blocks meant to run on one SM, .minnctapersm), and setmaxnreg then moves
// registers from the producer, which only issues copies, to the consumers.
//
// Measured on the H200 (commit 70ad0b2; docs/performance.md): a producer warpgroup that takes
// the registers of a second block per SM away from a 4-warp kernel costs up to a third of its
// speed, so a 4-warp kernel whose shared memory allows two blocks per SM keeps two (consumers
// at 232 registers).
#pragma once

#include "compiler/dialect/BobDialect.h"
#include "compiler/dialect/Target.h"

#include <algorithm>

namespace flashbob::bob {

struct RegisterSplit {
  int32_t blocksPerSm = 1;
  int32_t producer = 0, consumer = 0; // setmaxnreg targets; 0: no setmaxnreg
};

inline constexpr int32_t kProducerRegisters = 24; // setmaxnreg's minimum

// `sharedBytes`: the block's dynamic and static shared memory.
inline RegisterSplit registerSplit(SpecAttr spec, int64_t sharedBytes) {
  RegisterSplit split;
  if (!spec.getProducer())
    return split;
  const int64_t consumers = 32 * spec.getWarps();
  // Two blocks per SM only for one consumer warpgroup (two would get 112 registers each), and
  // not at d = 256, where ptxas cannot compile the widest products within the 128 registers
  // at entry (C7602, fwd d = 256 on the H200).
  if (spec.getWarps() <= 4 && spec.getHeadDim() <= 128 &&
      2 * (sharedBytes + kSharedReservePerBlock) <= targetInfo(spec.getArch()).sharedPerSm)
    split.blocksPerSm = 2;
  const int64_t perBlock = kRegistersPerSm / split.blocksPerSm;
  // Whole blocks of 8 registers (setmaxnreg's unit), at most kRegistersPerThread usable.
  int64_t consumer = (perBlock - 128 * kProducerRegisters) / consumers / 8 * 8;
  consumer = std::min<int64_t>(consumer, 256);
  // Without a shortage (one 4-warp block per SM: 256 registers at entry) nothing moves.
  if (perBlock / spec.getThreads() >= kRegistersPerThread)
    return split;
  split.producer = kProducerRegisters;
  split.consumer = static_cast<int32_t>(consumer);
  return split;
}

// The named barriers a block uses (bar.sync ids, 16 per block); 0 is bar.sync 0's, the whole
// block's.
inline constexpr int32_t kConsumerBarrier = 1;  // the consumer warps of a producer kernel
inline constexpr int32_t kWarpgroupBarrier = 2; // + warpgroup: one row warpgroup's 128 threads

// Two or three consumer warpgroups that own disjoint rows of the block (sm_90a, 8 or 12 warps,
// no column groups): each issues wgmma for its own 64 rows, and the A operands it stages are
// its own rows of the scratch tile, so a staging store needs only its own warpgroup's barrier.
// They then meet only at the loads, and drift apart so that one's softmax overlaps another's
// products (fwd d = 128 at 128 x 128: 4.65 -> 3.87 ms on the H200,
// bench/results/2026-12-03-h200-row-warpgroups.md).
inline bool hasRowWarpgroups(SpecAttr spec) {
  return hasHopperFeatures(spec) && spec.getWarps() >= 8 && spec.getWarps() % 4 == 0 &&
         spec.getWarpCols() == 1;
}

// The warp that runs a kernel's bulk reductions into global memory and the semaphores that
// order them (bob.bulk_reduce_add, bob.bulk_wait, bob.semaphore_wait, bob.semaphore_signal;
// lower_tiles/BulkPatterns.cpp): the last consumer warp. Not warp 0, whose thread 0 issues the
// TMA loads of kernels without a producer: a wait for another block's turn there would hold
// up the next block's copies too.
inline int64_t bulkWriterWarp(SpecAttr spec) { return spec.getWarps() - 1; }

// Attributes LowerKernel puts on a producer kernel's gpu.func for WarpSpecialization.cpp.
inline constexpr llvm::StringLiteral kProducerRegistersAttrName = "bob.producer_registers";
inline constexpr llvm::StringLiteral kConsumerRegistersAttrName = "bob.consumer_registers";

} // namespace flashbob::bob
