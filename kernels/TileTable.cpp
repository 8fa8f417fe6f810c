#include "kernels/TileTable.h"

namespace flashbob::kernels {

namespace {
struct Row {
  bob::KernelKind kind;
  int64_t maxHeadDim; // applies to head dims up to this
  TileConfig tiles;
};

// Register pressure decides these: query-major kinds keep block_m x d accumulators (fwd: 1,
// bwd_q: 1, bob_q: 4) plus block_m x block_n score tiles; key-major kinds keep block_n x d ones
// (bwd_kv: 2, bob_kv: 2). 4 warps of 16 rows each on the mma.sync path.
const Row kTable[] = {
    {bob::KernelKind::fwd, 128, {64, 64, 4, 1}},
    {bob::KernelKind::fwd, 256, {64, 32, 4, 1}},
    {bob::KernelKind::bwd_q, 64, {64, 64, 4, 1}},
    {bob::KernelKind::bwd_q, 256, {64, 32, 4, 1}},
    {bob::KernelKind::bwd_kv, 64, {64, 64, 4, 1}},
    {bob::KernelKind::bwd_kv, 256, {32, 64, 4, 1}},
    {bob::KernelKind::bob_q, 256, {64, 32, 4, 1}},
    {bob::KernelKind::bob_kv, 256, {32, 64, 4, 1}},
};
} // namespace

TileConfig defaultTiles(bob::KernelKind kind, int64_t headDim) {
  for (const Row &row : kTable)
    if (row.kind == kind && headDim <= row.maxHeadDim)
      return row.tiles;
  return {64, 64, 4, 1};
}

} // namespace flashbob::kernels
