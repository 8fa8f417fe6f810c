#include "kernels/TileTable.h"

#include "compiler/dialect/Target.h"

#include "llvm/Support/ErrorHandling.h"

namespace flashbob::kernels {

namespace {
struct Row {
  bob::KernelKind kind;
  int64_t maxHeadDim;    // applies to head dims up to this
  TileConfig hopper;     // sm_90a: wgmma, TMA, swizzled tiles, up to 227 KB of shared memory
  TileConfig generic;    // sm_80 .. sm_90: mma.sync, padded tiles, within sm_80's 163 KB
};

// Register pressure decides these: query-major kinds keep block_m x d accumulators (fwd: 1,
// bwd_q: 1, bob_q: 4, fwd_jvp: 1, fwd_dual: 2) plus block_m x block_n score tiles; key-major kinds keep block_n x d ones
// (bwd_kv: 2, bob_kv: 2). 4 warps of 16 rows each (one warpgroup: wgmma on sm_90a), or 8 warps
// in two column groups (two warpgroups side by side, each with half the columns). Two stages:
// the next block's tiles load while this one computes (bob-pipeline-loads). Rows marked "tuned"
// follow the autotuner at 16 heads x N = 16K on the H200 (`flashbob tune`, docs/performance.md
// "How to reproduce"; results: `git show bbfea53:bench/results/2026-11-30-h200-hopper-path.md`;
// bwd_kv d <= 64: at 64K with TMA loads, commit b20c493; with column groups and the d = 128
// backward: bench/results/2026-11-30-h200-column-groups.md); the others were its winners
// already. The generic
// column keeps every kernel within sm_80's shared memory (padded tiles are larger, and the
// scratch tiles of column groups come on top): test/unit/PtxMatrixTest.cpp checks both budgets.
// Rows ending in `true` take a producer warpgroup (warp specialization: 4 consumer warps and two
// blocks per SM, or 8 consumer warps in two row warpgroups and one block per SM,
// compiler/passes/WarpRoles.h), tuned with it at 16 heads x 16K
// (commit 70ad0b2; docs/performance.md, "What every kernel shares"); the BoB kernels were
// faster without it (the same commit).
const Row kTable[] = {
    // tuned: 3.52 vs 3.63 ms (64x64x4 without producer)
    {bob::KernelKind::fwd, 64, {64, 128, 4, 2, 1, true}, {64, 64, 4, 2}},
    // tuned with row warpgroups (bench/results/2026-12-03-h200-row-warpgroups.md): 3.87 vs
    // 4.45 ms (64x64x4 with producer); before: 4.95 vs 5.17 ms (128x128x8), 5.97 vs 6.52 ms
    // (64x64x4)
    {bob::KernelKind::fwd, 128, {128, 128, 8, 2, 1, true}, {64, 64, 4, 2}},
    {bob::KernelKind::fwd, 256, {64, 32, 4, 2}, {64, 32, 4, 2}},
    // tuned: 3.71 vs 4.33 ms (64x64x4 without producer)
    {bob::KernelKind::bwd_q, 64, {64, 128, 4, 2, 1, true}, {64, 64, 4, 2}},
    // tuned with row warpgroups: the bwd op 13.2 vs 14.4 ms (64x64x4 with producer); before:
    // 5.73 vs 7.19 ms (64x64x4 without producer), 6.62 vs 7.36 ms (64x32x4)
    {bob::KernelKind::bwd_q, 128, {128, 128, 8, 2, 1, true}, {64, 64, 4, 2}},
    // 64 x 32 over 4 warps spilled (255 registers, 80 B on sm_90a, 72 on sm_80): the d = 256
    // accumulator is 128 floats a thread there. Two column groups halve it (148 / 181
    // registers); sm_90a keeps 64 key rows a step, sm_80's padded tiles fit 32.
    {bob::KernelKind::bwd_q, 256, {64, 64, 8, 2, 2}, {64, 32, 8, 2, 2}},
    // tuned with a producer (2026-12-03, results/2026-12-03-h200-rotated-forward.md): 5.72 vs
    // 6.12 ms (64x64x4 without, the earlier winner: 6.07 vs 6.84 ms for 32x64x4).
    {bob::KernelKind::bwd_kv, 64, {64, 64, 4, 2, 1, true}, {32, 64, 4, 2}},
    // tuned: 9.29 vs 11.90 ms (32x64x4). sm_80 (mma.sync, no register-A staging) spilled at
    // 64 x 64 (255 registers, 60 B; 12 B at d = 96): 32 query rows a step, 244 registers.
    {bob::KernelKind::bwd_kv, 128, {64, 64, 4, 2}, {32, 64, 4, 2}},
    // Two d = 256 accumulators over 4 warps are 256 floats a thread (2 KB of spills); two
    // column groups make them 128 (184 / 236 registers).
    {bob::KernelKind::bwd_kv, 256, {32, 64, 8, 2, 2}, {32, 64, 8, 2, 2}},
    {bob::KernelKind::bob_q, 64, {64, 32, 4, 2}, {64, 32, 4, 2}},
    // Two column groups: X1..X4 at d = 128 are 4 x 64 x 128 floats, 256 per thread over 4 warps
    // (spills), 128 over 8 warps in two groups of 64 columns. Tuned: 37.6 ms vs 81.2 (64x32x4)
    // and 51.6 (64x32, two groups). On sm_80 the same tiles need 232 KB: 32 key rows a step in
    // two groups (242 registers; 64x32x4 spilled 13.5 KB a thread).
    {bob::KernelKind::bob_q, 128, {64, 64, 8, 2, 2}, {64, 32, 8, 2, 2}},
    // d = 256: four accumulators of 16 rows x 64 columns a warp are 128 floats a thread even in
    // four column groups (the most there are), and the kernel still spills there (80 B on
    // sm_90a, against 6.6 KB for 64x32x4); sm_80 cannot fit four groups (whose key block must
    // be 64 rows: 172 KB), so it keeps 64x16x4 (tile_table_spill_test lists both as known).
    {bob::KernelKind::bob_q, 256, {32, 64, 8, 1, 4}, {64, 16, 4, 1}},
    // tuned after the wgmma register fixes (commit c04ef95): 12.9 vs 13.6 ms (32x64x4), 64x64x4
    // spilling. With register-A products 64x64x4 still spills 116 B (255 registers): the four
    // score tiles in flight (4 x 32 floats), the two accumulators (64) and the swept rows' L, D,
    // c and b (4 x 16) are 256 registers before any address. 48 query rows a step make them
    // 4 x 24, 64 and 4 x 12 (240 registers, 253 causal; not timed yet).
    {bob::KernelKind::bob_kv, 64, {48, 64, 4, 2}, {32, 64, 4, 2}},
    // tuned: 25.7 ms vs 26.4 (32x128x8, the earlier winner: 31.8 vs 37.3 ms for 32x64x4 before
    // TMA, which sm_80 keeps: 32x128x8 needs 191 KB there).
    {bob::KernelKind::bob_kv, 128, {64, 64, 8, 2, 2}, {32, 64, 4, 2}},
    // d = 256: two accumulators of 64 key rows over 4 warps are 256 floats a thread (2.2 KB of
    // spills); four column groups make them 64 (224 registers on sm_90a with 32 key rows over 8
    // warps, 219 on sm_80 with 16 over 4, which fits its shared memory).
    {bob::KernelKind::bob_kv, 256, {64, 32, 8, 1, 4}, {64, 16, 4, 1, 4}},
    // Not tuned yet: one accumulator like fwd, four swept operands like bob_q's K, V, uK, uV.
    {bob::KernelKind::fwd_jvp, 64, {64, 64, 4, 2}, {64, 32, 4, 2}},
    {bob::KernelKind::fwd_jvp, 128, {64, 64, 4, 2}, {64, 32, 4, 2}},
    // d = 256 spilled over 4 warps (255 registers, 132 B); two column groups: 160 registers on
    // sm_90a, 198 on sm_80 (one stage there: two need 208 KB).
    {bob::KernelKind::fwd_jvp, 256, {64, 32, 8, 2, 2}, {64, 32, 8, 1, 2}},
    // Two accumulators (O, tO), four swept operands like fwd_jvp. sm_90a tuned at 16 heads x
    // 16K on an H100 (bench/results/2026-12-07-h100-deferred-jvp-fused-turn-two-acc.md): d <= 64
    // the table's tile won (11.9 ms; 128 x 64 in two row warpgroups 13.2 causal or not);
    // d = 128 128 x 64 in two row warpgroups, 9.7 ms against 13.7 for 64 x 64 x 4 (the
    // producer: 11.4). The variants (causal, windows, GQA, packed, any scale, fp16) compile
    // without spills: d <= 64 sm_90a 167-190 registers (232 a consumer with the producer), sm_80
    // 251-254 (64 x 32 spilled 16-24 bytes at 168 registers with a two-sided window); d = 128
    // sm_90a 212-255, but GQA on a packed batch with a two-sided window spills 80 bytes (64 x 64
    // x 4 too: 88); sm_80 d = 128 64 x 32 spills 24-52 bytes, 64 x 16 takes 232-238 registers. d = 256: two accumulators of 64 x 256 are 256 floats a thread
    // over 4 warps; two column groups of 8 warps halve them (sm_90a 238-255 registers, sm_80
    // 254-255, one stage within its 163 KB).
    {bob::KernelKind::fwd_dual, 64, {64, 64, 4, 2, 1, true}, {64, 64, 4, 2}},
    {bob::KernelKind::fwd_dual, 128, {128, 64, 8, 2}, {64, 16, 4, 2}},
    {bob::KernelKind::fwd_dual, 256, {64, 32, 8, 2, 2}, {64, 32, 8, 1, 2}},
    // The fused backward (sm_90a only; the generic column is never compiled: its kinds refuse
    // other targets). Not tuned yet. bwd_fused keeps bwd_kv's sm_90a tiles but the producer
    // (block_m = 16 * warps: dQ's part of a pair is one wgmma accumulator), and its shared
    // memory adds dS^T and the f32 staging of dQ's part: 82 KB at d = 64 (two blocks per SM),
    // 146 KB at d = 128. bwd_dot and bwd_dq load one tile pair, or one tile, per block: no
    // sweep, one stage.
    {bob::KernelKind::bwd_fused, 64, {64, 64, 4, 2}, {64, 64, 4, 2}},
    {bob::KernelKind::bwd_fused, 128, {64, 64, 4, 2}, {64, 64, 4, 2}},
    {bob::KernelKind::bwd_fused, 256, {64, 64, 4, 1}, {64, 64, 4, 1}},
    {bob::KernelKind::bwd_dot, 256, {64, 64, 4, 1}, {64, 64, 4, 1}},
    {bob::KernelKind::bwd_dq, 256, {64, 64, 4, 1}, {64, 64, 4, 1}},
};
} // namespace

TileConfig defaultTiles(bob::KernelKind kind, int64_t headDim, bob::Arch arch) {
  const bool hopper = tableTarget(arch) == bob::Arch::sm_90a;
  for (const Row &row : kTable)
    if (row.kind == kind && headDim <= row.maxHeadDim) {
      // Column groups split head_dim into whole 16-column fragments per group (d = 80 or 112
      // cannot be halved so): those head dims take the generic tiles, and where these have
      // column groups too, as many fewer as it takes (the warps with them: each warp keeps its
      // rows), which is valid everywhere.
      TileConfig tiles = hopper ? row.hopper : row.generic;
      if (headDim % (16 * tiles.warpCols) == 0)
        return tiles;
      tiles = row.generic;
      while (headDim % (16 * tiles.warpCols) != 0) {
        tiles.warpCols /= 2;
        tiles.warps /= 2;
      }
      return tiles;
    }
  return {64, 64, 4, 2};
}

llvm::Expected<std::vector<std::pair<bob::KernelKind, TileConfig>>>
parseTileOverrides(llvm::StringRef text) {
  std::vector<std::pair<bob::KernelKind, TileConfig>> out;
  llvm::SmallVector<llvm::StringRef, 8> entries;
  text.split(entries, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef entry : entries) {
    auto [kindText, tilesText] = entry.trim().split('=');
    std::optional<bob::KernelKind> kind = bob::symbolizeKernelKind(kindText.trim());
    std::optional<TileConfig> tiles = TileConfig::parse(tilesText.trim());
    if (!kind || !tiles)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "FLASHBOB_TILES: '%s' is not kind=tiles (a kernel kind such as bob_kv, '=', tiles as "
          "kernel names spell them, such as m48_n128_w8_s2)",
          entry.str().c_str());
    out.emplace_back(*kind, *tiles);
  }
  return out;
}

bob::Arch tableTarget(bob::Arch arch) {
  return bob::hasHopperFeatures(arch) ? bob::Arch::sm_90a : bob::Arch::sm_80;
}

int64_t tableSharedBudget(bob::Arch arch) {
  return bob::targetInfo(tableTarget(arch)).sharedPerBlock;
}

std::vector<TileConfig> candidateTiles(bob::KernelKind kind, int64_t headDim, bob::Arch arch) {
  const bool keyMajor = bob::isKeyMajor(kind);
  TileConfig base = defaultTiles(kind, headDim, arch);
  std::vector<TileConfig> out = {base};
  // Without a sweep block_n means nothing: other tiles would be the same kernel.
  if (kind == bob::KernelKind::bwd_dot || kind == bob::KernelKind::bwd_dq)
    return out;
  auto add = [&](TileConfig t) {
    for (const TileConfig &o : out)
      if (o.blockM == t.blockM && o.blockN == t.blockN && o.warps == t.warps &&
          o.warpCols == t.warpCols && o.producer == t.producer)
        return; // the same tiles (stages are the default's in every candidate)
    // Each warp owns whole 16-row fragments of the block's own rows (those of its group).
    int64_t own = keyMajor ? t.blockN : t.blockM;
    if (own % (16 * (t.warps / t.warpCols)) == 0 && t.blockM >= 16 && t.blockN >= 16)
      out.push_back(t);
  };
  auto config = [&](int64_t own, int64_t other, int64_t warps, int64_t warpCols) {
    return keyMajor ? TileConfig{other, own, warps, base.stages, warpCols}
                    : TileConfig{own, other, warps, base.stages, warpCols};
  };
  for (int64_t own : {64, 128})
    for (int64_t other : {32, 64, 128})
      for (int64_t warps : {4, 8})
        add(config(own, other, warps, 1));
  // Key-major kernels also sweep 48 query rows a step: bob_kv keeps four score tiles and four
  // row scalars of the swept rows per thread, which at 64 no longer fit beside its two
  // accumulators (the tile table's d = 64 row), at 48 do, over one or two row warpgroups.
  if (keyMajor)
    for (int64_t own : {64, 128})
      for (int64_t warps : {4, 8})
        add(config(own, 48, warps, 1));
  // Two warpgroups side by side over 64 own rows (half the per-thread state of 4 warps), or
  // over 128 (each warp two fragments of rows, half of each one's columns).
  for (int64_t own : {64, 128})
    for (int64_t other : {32, 64, 128})
      add(config(own, other, 8, 2));
  // Three row warpgroups over 192 query rows (wgmma only): FlashAttention-3's forward tile at
  // d = 64. Key-major kernels keep two accumulators of their own rows, which spill at 160
  // registers a thread (bwd_kv d = 128: 42 ms against 7.8,
  // bench/results/2026-12-03-h200-first-reader-waits.md).
  if (bob::hasHopperFeatures(arch) && !keyMajor)
    for (int64_t other : {64, 128})
      add(config(192, other, 12, 1));
  // Warp specialization (bob-pipeline-loads): the same tiles, their loads issued by a producer
  // warpgroup that gives its registers to the consumers.
  if (bob::hasHopperFeatures(arch)) {
    const size_t plain = out.size();
    for (size_t i = 0; i < plain; ++i)
      if (out[i].stages == 2 && out[i].warpCols == 1 && !out[i].producer) {
        TileConfig t = out[i];
        t.producer = true;
        add(t);
      }
  }
  return out;
}

namespace {
int64_t accumulatorCount(bob::KernelKind kind) {
  switch (kind) {
  case bob::KernelKind::fwd: return 1;
  case bob::KernelKind::bwd_q: return 1;
  case bob::KernelKind::bwd_kv: return 2;
  case bob::KernelKind::bob_q: return 4;
  case bob::KernelKind::bob_kv: return 2;
  case bob::KernelKind::fwd_jvp: return 1;
  case bob::KernelKind::fwd_dual: return 2;
  case bob::KernelKind::bwd_dot: return 2; // O and dO
  case bob::KernelKind::bwd_fused: return 3; // dK, dV, and dQ's part of a pair
  case bob::KernelKind::bwd_dq: return 1;
  }
  llvm_unreachable("every kernel kind keeps accumulators");
}
} // namespace

int64_t accumulatorFloatsPerThread(const compiler::KernelSpec &spec) {
  const TileConfig &t = spec.tiles;
  const int64_t own = bob::isKeyMajor(spec.kind) ? t.blockN : t.blockM;
  return accumulatorCount(spec.kind) * own * spec.headDim / (32 * t.warps);
}

llvm::Error checkRegisterFootprint(const compiler::KernelSpec &spec) {
  const int64_t floats = accumulatorFloatsPerThread(spec);
  const TileConfig &t = spec.tiles;
  const int64_t own = bob::isKeyMajor(spec.kind) ? t.blockN : t.blockM;
  // 16 rows a warp is the least a warp can own (one mma fragment): at that point the state is
  // the kernel's minimum for this head dim (bob_q at d = 256 still spills, and runs).
  if (floats <= kMaxAccumulatorFloatsPerThread || own / (t.warps / t.warpCols) <= 16)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "%s keeps %lld accumulator(s) of %lldx%lld f32 over %lld threads = %lld floats per thread; "
      "more than %lld cannot stay in a thread's 255 registers: use a smaller %s or more warps",
      bob::stringifyKernelKind(spec.kind).str().c_str(),
      static_cast<long long>(accumulatorCount(spec.kind)), static_cast<long long>(own),
      static_cast<long long>(spec.headDim), static_cast<long long>(32 * t.warps),
      static_cast<long long>(floats), static_cast<long long>(kMaxAccumulatorFloatsPerThread),
      bob::isKeyMajor(spec.kind) ? "block_n" : "block_m");
}

} // namespace flashbob::kernels
