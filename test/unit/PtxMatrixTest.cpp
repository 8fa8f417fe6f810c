// Every kernel kind that exists, compiled for the matrix the compiler promises (head dims 64 and
// 128, three tile configurations, bf16/fp16, causal or not, sm_80 and sm_90a), checked against
// independent judges: ptxas must accept the PTX (it assembles the cubin), the PTX must use tensor
// cores (wgmma on sm_90a, mma.sync on sm_80) and declare dynamic shared memory as
// `.extern ... []`. CPU only: no GPU needed.
//
// The compiling test cases exist once per kernel kind, tagged with the kind ("[bob_q]"), and
// CTest runs each kind's slice as its own entry (test/CMakeLists.txt), so that `ctest -j`
// assembles the slices in parallel; "the per-kind slices cover the matrix once" checks that
// together they are the whole matrix. Run without arguments, the binary runs everything.
#include "compiler/dialect/Target.h"
#include "jit/Compile.h"
#include "kernels/Signature.h"
#include "kernels/TileTable.h"
#include "support/Knobs.h"

#include "mlir/IR/MLIRContext.h"

#include <catch2/catch.hpp>

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>

using namespace flashbob;

namespace {
// The judge is the toolkit's ptxas binary, whatever this process would choose otherwise
// (assembler_test checks nvJitLink on the same kernels).
const bool kPtxasJudge = [] {
  support::setOverride(support::Knob::Assembler, "ptxas");
  return true;
}();

using Tiles = kernels::TileConfig;
using bob::Arch;
void applyTiles(compiler::KernelSpec &spec, const Tiles &t) { spec.tiles = t; }

const bob::KernelKind kImplementedKinds[] = {bob::KernelKind::fwd, bob::KernelKind::bwd_q,
                                             bob::KernelKind::bwd_kv, bob::KernelKind::bob_q,
                                             bob::KernelKind::bob_kv, bob::KernelKind::fwd_jvp,
                                             bob::KernelKind::fwd_dual};

// The spec the launcher starts from: the tile table's default tiles for `arch`.
compiler::KernelSpec defaultSpec(bob::KernelKind kind, int64_t d, Arch arch) {
  compiler::KernelSpec spec;
  spec.kind = kind;
  spec.headDim = d;
  spec.arch = arch;
  applyTiles(spec, kernels::defaultTiles(kind, d, arch));
  return spec;
}


// Three configurations per kind: the tile table's default (double-buffered loads), 8 warps
// over 128 own rows with synchronous loads, and 8 warps in two column groups over 64 own rows
// (32 other rows: with sm_80's padded tiles, 64 would not fit).
constexpr int kConfigurations = 3;
Tiles tiles(bob::KernelKind kind, int64_t d, int which, Arch arch) {
  if (which == 0)
    return kernels::defaultTiles(kind, d, arch);
  if (which == 1)
    return bob::isKeyMajor(kind) ? Tiles{32, 128, 8, 1} : Tiles{128, 32, 8, 1};
  return bob::isKeyMajor(kind) ? Tiles{32, 64, 8, 2, /*warpCols=*/2}
                               : Tiles{64, 32, 8, 2, /*warpCols=*/2};
}

// With FLASHBOB_PTX_SNAPSHOT_DIR set, every variant's PTX is also written there as <name>.ptx,
// so that a refactoring can show its PTX byte-identical to the commit before
// (`diff -r before/ after/`; docs/architecture.md, "Checking a refactoring").
void snapshot(const compiler::KernelSpec &spec, const std::string &ptx) {
  const std::string dir = support::getString(support::Knob::PtxSnapshotDir);
  if (dir.empty())
    return;
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, spec.name() + ".ptx");
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  REQUIRE_FALSE(ec);
  os << ptx;
}

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// `spec` compiled and assembled, once per process (a failure ends the test case). The families
// below share specs (a twin is every derived family's, and some plain variants are twins), and
// compiling is most of this file's time; the compile is deterministic, so each check sees what a
// compile of its own would give. Keyed by KernelSpec::name, which names every field. Specs share
// only with their own kind and the test cases run kind by kind, so the kernels of one kind are
// kept at a time.
const compiler::KernelArtifacts &assembled(const compiler::KernelSpec &spec) {
  static std::map<std::string, compiler::KernelArtifacts> compiled;
  static bob::KernelKind kind = spec.kind;
  if (spec.kind != kind) {
    compiled.clear();
    kind = spec.kind;
  }
  auto it = compiled.find(spec.name());
  if (it != compiled.end())
    return it->second;
  auto artifacts = jit::compileKernel(spec, /*assemble=*/true);
  if (!artifacts)
    FAIL(llvm::toString(artifacts.takeError()));
  return compiled.emplace(spec.name(), std::move(*artifacts)).first->second;
}

// Each family of compiled variants is a list of specs per kind and a check of one spec; the
// kind's test case checks every spec of its list.

// The plain matrix: each kind at d = 64 and 128, in the three configurations, bf16 and fp16,
// causal or not, on sm_80 and sm_90a (48 per kind).
std::vector<compiler::KernelSpec> matrixSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (int64_t d : {64, 128})
    for (int which = 0; which < kConfigurations; ++which)
      for (bob::ElemType dtype : {bob::ElemType::bf16, bob::ElemType::f16})
        for (bool causal : {false, true})
          for (Arch arch : {Arch::sm_80, Arch::sm_90a}) {
            Tiles t = tiles(kind, d, which, arch);
            compiler::KernelSpec spec;
            spec.kind = kind;
            spec.headDim = d;
            applyTiles(spec, t);
            spec.dtype = dtype;
            spec.causal = causal;
            spec.arch = arch;
            spec.scaleArgument = causal; // half the variants each way
            specs.push_back(spec);
          }
  return specs;
}

void checkMatrixVariant(const compiler::KernelSpec &spec) {
  const bob::KernelKind kind = spec.kind;
  const Arch arch = spec.arch;
  const bob::ElemType dtype = spec.dtype;
  const Tiles &t = spec.tiles;
  INFO(spec.name());
  const compiler::KernelArtifacts *artifacts = &assembled(spec);
  const std::string &ptx = artifacts->ptx;
  snapshot(spec, ptx);
  const bool hopper = arch == Arch::sm_90a;
  const std::string types = dtype == bob::ElemType::bf16 ? "bf16.bf16" : "f16.f16";
  // sm_90a: every configuration here has whole warpgroups of accumulator rows, so
  // products are warpgroup wgmma (k16) from swizzled tiles aligned for 1024-byte
  // atoms, filled by TMA completing on mbarriers (one tensor map per loaded
  // tensor and box), with no cp.async left; sm_80: mma.sync m16n8k16 from padded
  // tiles filled by cp.async.
  if (hopper) {
    CHECK(ptx.find("wgmma.mma_async.sync.aligned.m64n") != std::string::npos);
    CHECK(ptx.find("k16.f32." + types) != std::string::npos);
    CHECK(ptx.find(".extern .shared .align 1024 .b8 flashbob_smem[]") !=
          std::string::npos);
    CHECK(ptx.find("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::"
                   "complete_tx::bytes") != std::string::npos);
    CHECK(ptx.find("mbarrier.try_wait.parity.shared.b64") != std::string::npos);
    CHECK(ptx.find("cp.async.cg") == std::string::npos);
    CHECK(!artifacts->tensorMaps.empty());
    // ptxas did not have to add wgmma fences or waits of its own (C7517/C7519:
    // "warpgroup.wait is injected ..."): an injected wait serialises products that
    // the lowering leaves in flight together.
    CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
  } else {
    CHECK(ptx.find("cp.async.bulk") == std::string::npos);
    CHECK(artifacts->tensorMaps.empty());
    CHECK(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32." + types + ".f32") !=
          std::string::npos);
    CHECK(ptx.find("wgmma") == std::string::npos);
    CHECK(ptx.find(".extern .shared .align 16 .b8 flashbob_smem[]") != std::string::npos);
  }
  // Column groups combine row sums through a static buffer of 2 x 64 f32 (bob_q
  // reduces D, c and b; on sm_80 its products read A from shared via ldmatrix).
  if (t.warpCols == 2 && kind == bob::KernelKind::bob_q) {
    CHECK(ptx.find(".shared .align 16 .b8 flashbob_row_exchange[512]") !=
          std::string::npos);
    if (!hopper)
      CHECK(ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16") != std::string::npos);
  }
  // The parameters: the signature's f32 scalars (read only by the variants for any
  // scale; the default scale's are immediates), then on sm_90a each tensor map by
  // value, 128 bytes aligned to 64, whose generic address the TMA copies take
  // (cvta.param).
  const auto scalars = llvm::count_if(kernels::signature(kind, false),
                                      [](const kernels::Param &p) { return p.isScalar; });
  CHECK(occurrences(ptx, ".param .f32 ") == size_t(scalars));
  // Reads of the scalars by name: other 32-bit parameter loads are the low halves of 64-bit
  // memref sizes, which 32-bit index arithmetic reads so (compiler/pipeline/Pipeline.cpp).
  size_t scalarReads = 0;
  for (size_t at = ptx.find(".param .f32 "); at != std::string::npos;
       at = ptx.find(".param .f32 ", at + 1)) {
    const size_t name = at + std::string(".param .f32 ").size();
    const size_t end = ptx.find_first_of(",\n)", name);
    scalarReads += occurrences(ptx, "[" + ptx.substr(name, end - name) + "]");
  }
  if (spec.scaleArgument)
    CHECK(scalarReads >= size_t(scalars));
  else
    CHECK(scalarReads == 0);
  const size_t maps = artifacts->tensorMaps.size(), params = occurrences(ptx, ".param ");
  CHECK(occurrences(ptx, ".param .align 64 .b8 ") == maps);
  for (size_t i = params - maps; i < params; ++i)
    CHECK(ptx.find(".param .align 64 .b8 " + artifacts->entry + "_param_" +
                   std::to_string(i) + "[128]") != std::string::npos);
  CHECK(occurrences(ptx, "cvta.param.u64") == maps);
  // Pointer parameters are the memrefs' two each, none a tensor map's.
  CHECK(occurrences(ptx, ".param .u64 .ptr ") == 2 * kernels::operandCount(kind, false));
  CHECK(ptx.find(".target " + bob::stringifyArch(arch).str()) != std::string::npos);
  CHECK(ptx.find(".entry " + artifacts->entry) != std::string::npos);
  CHECK(artifacts->cubin.compare(0, 4, "\x7f" "ELF") == 0);
  CHECK(artifacts->registers > 0);
  CHECK(artifacts->sharedBytes > 0);
  std::printf("%-60s regs %3d spill %5d B shared %6lld B\n", spec.name().c_str(),
              artifacts->registers, artifacts->spillBytes,
              static_cast<long long>(artifacts->sharedBytes));
}

// The producer form (sm_90a): each kind at d = 64 and 128, causal or not (4 per kind).
Tiles producerTiles(bob::KernelKind kind) {
  // bob_q keeps four accumulators: 64 x 32 tiles (the table's d = 64 choice).
  return kind == bob::KernelKind::bob_q ? Tiles{64, 32, 4, 2, 1, true}
                                        : Tiles{64, 64, 4, 2, 1, true};
}

std::vector<compiler::KernelSpec> producerSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (int64_t d : {64, 128})
    for (bool causal : {false, true}) {
      compiler::KernelSpec spec;
      spec.kind = kind;
      spec.headDim = d;
      spec.causal = causal;
      applyTiles(spec, producerTiles(kind));
      specs.push_back(spec);
    }
  return specs;
}

void checkProducerVariant(const compiler::KernelSpec &spec) {
  // Warp specialization (sm_90a): 4 consumer warps and a producer warpgroup, so 256 threads.
  // ptxas must honour setmaxnreg (no C7508 "ignored"); the one bar.sync 0 is the mbarrier
  // initialisation before the roles split, every other barrier is the consumers' named barrier
  // 1 for 128 threads; the producer waits on empty barriers, the consumers arrive on them.
  // Two blocks per SM (.minnctapersm 2: 128 registers at entry, 24 / 232 after setmaxnreg)
  // when the shared memory of two fits the SM's 228 KB, else one and no setmaxnreg.
  INFO(spec.name());
  const compiler::KernelArtifacts *artifacts = &assembled(spec);
  const std::string &ptx = artifacts->ptx;
  snapshot(spec, ptx);
  CHECK(artifacts->threads == 256);
  CHECK(artifacts->ptxasLog.find("setmaxnreg' ignored") == std::string::npos);
  CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
  auto count = [&](const std::string &what) { return occurrences(ptx, what); };
  CHECK(count("bar.sync \t0;") == 1);
  CHECK(count("bar.sync \t1, 128;") >= 1);
  CHECK(count("barrier.sync") == 0);
  CHECK(count("mbarrier.arrive.shared.b64") >= 1);
  CHECK(count("cp.async.bulk.tensor.4d") >= 2);
  const bool twoBlocks = ptx.find(".minnctapersm 2") != std::string::npos;
  CHECK((twoBlocks || ptx.find(".minnctapersm 1") != std::string::npos));
  if (twoBlocks) {
    CHECK(artifacts->registers == 128);
    CHECK(count("setmaxnreg.dec.sync.aligned.u32 \t24;") == 1);
    CHECK(count("setmaxnreg.inc.sync.aligned.u32 \t232;") == 1);
  } else {
    CHECK(count("setmaxnreg") == 0);
  }
  std::printf("%-60s regs %3d spill %5d B shared %6lld B%s\n", spec.name().c_str(),
              artifacts->registers, artifacts->spillBytes,
              static_cast<long long>(artifacts->sharedBytes), twoBlocks ? " 2/SM" : "");
}

// The plain specs a variant is checked against: the kind at d = 64 and 128, causal or not,
// on sm_80 and sm_90a in the table's default tiles, and on sm_90a in the producer form too
// (12 per kind).
std::vector<compiler::KernelSpec> twinSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (Arch arch : {Arch::sm_80, Arch::sm_90a})
        for (bool producer : {false, true}) {
          if (producer && arch != Arch::sm_90a)
            continue;
          compiler::KernelSpec spec = defaultSpec(kind, d, arch);
          spec.causal = causal;
          if (producer)
            applyTiles(spec, producerTiles(kind));
          specs.push_back(spec);
        }
  return specs;
}

// `variant` and its plain `twin`, each compiled and assembled (a failure ends the test case);
// the variant's PTX snapshotted, its entry and cubin checked.
std::pair<const compiler::KernelArtifacts *, const compiler::KernelArtifacts *>
assembleTwins(const compiler::KernelSpec &twin, const compiler::KernelSpec &variant) {
  const compiler::KernelArtifacts &plain = assembled(twin);
  const compiler::KernelArtifacts &artifacts = assembled(variant);
  snapshot(variant, artifacts.ptx);
  CHECK(artifacts.ptx.find(".entry " + artifacts.entry) != std::string::npos);
  CHECK(artifacts.cubin.compare(0, 4, "\x7f" "ELF") == 0);
  return {&plain, &artifacts};
}

// Grouped-query attention: each twin with spec.grouped (12 per kind).
std::vector<compiler::KernelSpec> groupedSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (const compiler::KernelSpec &spec : twinSpecs(kind)) {
    compiler::KernelSpec grouped = spec;
    grouped.grouped = true;
    specs.push_back(grouped);
  }
  return specs;
}

void checkGroupedVariant(const compiler::KernelSpec &grouped) {
  // Each kind with spec.grouped, in the table's default tiles and in the producer form, next to
  // its ungrouped twin: ptxas accepts it, the entry is named "_gqa", and the grouped key-major
  // sweep (its head and block computed from one step counter, with divisions) is still
  // double-buffered: as many async copies (TMA on sm_90a, cp.async on sm_80) as the twin's.
  compiler::KernelSpec spec = grouped;
  spec.grouped = false;
  INFO(grouped.name());
  CHECK(grouped.name().find("_gqa") != std::string::npos);
  auto [twin, artifacts] = assembleTwins(spec, grouped);
  const std::string &ptx = artifacts->ptx;
  CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
  CHECK(artifacts->ptxasLog.find("setmaxnreg' ignored") == std::string::npos);
  for (const char *copy : {"cp.async.bulk.tensor", "cp.async.cg"})
    CHECK(occurrences(ptx, copy) == occurrences(twin->ptx, copy));
  CHECK(artifacts->tensorMaps.size() == twin->tensorMaps.size());
  std::printf("%-60s regs %3d spill %5d B (ungrouped: regs %3d spill %5d B)\n",
              grouped.name().c_str(), artifacts->registers, artifacts->spillBytes,
              twin->registers, twin->spillBytes);
}

// Sliding windows: each twin with a window, both sides, or a left side on a causal kernel (12
// per kind).
std::vector<compiler::KernelSpec> windowedSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (const compiler::KernelSpec &spec : twinSpecs(kind)) {
    compiler::KernelSpec windowed = spec;
    windowed.windowLeft = 200;
    windowed.windowRight = spec.causal ? -1 : 37;
    specs.push_back(windowed);
  }
  return specs;
}

void checkWindowedVariant(const compiler::KernelSpec &windowed) {
  // Each kind with a window (both sides; a left side on a causal kernel), in the table's default
  // tiles and in the producer form: ptxas accepts it, the entry names the window, and the sweep
  // with its window-dependent lower and upper bounds is still double-buffered (as many async
  // copies as the unwindowed twin's); registers and spills printed beside the twin's.
  compiler::KernelSpec spec = windowed;
  spec.windowLeft = spec.windowRight = -1;
  INFO(windowed.name());
  CHECK(windowed.name().find(spec.causal ? "_wl200_causal" : "_wl200_wr37") !=
        std::string::npos);
  auto [twin, artifacts] = assembleTwins(spec, windowed);
  const std::string &ptx = artifacts->ptx;
  CHECK(artifacts->ptxasLog.find("setmaxnreg' ignored") == std::string::npos);
  for (const char *copy : {"cp.async.bulk.tensor", "cp.async.cg"})
    CHECK(occurrences(ptx, copy) == occurrences(twin->ptx, copy));
  std::printf("%-60s regs %3d spill %5d B (no window: regs %3d spill %5d B)\n",
              windowed.name().c_str(), artifacts->registers, artifacts->spillBytes,
              twin->registers, twin->spillBytes);
}

// Packed batches: each twin with spec.varlen, grouped and windowed too at d = 128 on sm_90a
// (12 per kind).
std::vector<compiler::KernelSpec> packedSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (const compiler::KernelSpec &spec : twinSpecs(kind)) {
    compiler::KernelSpec packed = spec;
    packed.varlen = true;
    const bool combined = spec.headDim == 128 && spec.arch == Arch::sm_90a;
    if (combined) {
      packed.grouped = true;
      packed.windowLeft = 200;
    }
    specs.push_back(packed);
  }
  return specs;
}

void checkPackedVariant(const compiler::KernelSpec &packed) {
  // Each kind for a packed batch (spec.varlen; a grouped and windowed one among them, as a
  // Llama layer on packed sequences runs), in the table's default tiles and in the producer
  // form: ptxas accepts it, the entry is named "_varlen", it takes the two offsets as memrefs
  // (two pointers more than its twin), and its loads are the twin's: the same tensor maps and as
  // many async copies (the sequence's rows, loaded from the offsets before the tiles are
  // allocated, reach the producer warpgroup without reloading them). Its stores are direct (a
  // packed batch's bound is a sequence's, not a tensor's), where the twin may stage outputs
  // and store them by TMA: one map and one bulk group each.
  const compiler::KernelSpec &spec = packed;
  compiler::KernelSpec twin = packed;
  twin.varlen = false;
  INFO(packed.name());
  CHECK(packed.name().find("_varlen") != std::string::npos);
  auto [plain, artifacts] = assembleTwins(twin, packed);
  const std::string &ptx = artifacts->ptx;
  CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
  CHECK(artifacts->ptxasLog.find("setmaxnreg' ignored") == std::string::npos);
  CHECK(occurrences(ptx, ".param .u64 .ptr ") == 2 * kernels::operandCount(spec.kind, true));
  CHECK(kernels::operandCount(spec.kind, true) == kernels::operandCount(spec.kind, false) + 2);
  for (const char *copy : {"cp.async.bulk.tensor.4d.shared::cluster.global", "cp.async.cg"})
    CHECK(occurrences(ptx, copy) == occurrences(plain->ptx, copy));
  CHECK(occurrences(ptx, "cp.async.bulk.tensor.4d.global.shared::cta") == 0);
  const size_t stagedStores = occurrences(plain->ptx, "cp.async.bulk.commit_group");
  CHECK(artifacts->tensorMaps.size() + stagedStores == plain->tensorMaps.size());
  std::printf("%-60s regs %3d spill %5d B (dense: regs %3d spill %5d B)\n",
              packed.name().c_str(), artifacts->registers, artifacts->spillBytes,
              plain->registers, plain->spillBytes);
}

// Long sweeps: each twin with spec.longSweep, for the kinds that flush (12 per such kind, none
// for the others).
std::vector<compiler::KernelSpec> longSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (const compiler::KernelSpec &spec : twinSpecs(kind)) {
    if (!bob::isLongSweepKind(spec.kind))
      continue;
    compiler::KernelSpec long_ = spec;
    long_.longSweep = true;
    specs.push_back(long_);
  }
  return specs;
}

void checkLongVariant(const compiler::KernelSpec &long_) {
  // Each kind that flushes (spec.longSweep: the backward's and BoB's), in the table's default
  // tiles and in the producer form, sm_80 and sm_90a: ptxas accepts it, the entry is named
  // "_long", the reserves are a stack frame of whole-vector local accesses (their loads and
  // stores, no registers or shared memory), no wgmma wait is injected, and its loads are the
  // twin's (as many async copies).
  compiler::KernelSpec spec = long_;
  spec.longSweep = false;
  INFO(long_.name());
  CHECK(long_.name().find("_long") != std::string::npos);
  auto [twin, artifacts] = assembleTwins(spec, long_);
  const std::string &ptx = artifacts->ptx;
  CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
  CHECK(artifacts->ptxasLog.find("setmaxnreg' ignored") == std::string::npos);
  CHECK(occurrences(ptx, "__local_depot") > 0);
  CHECK(occurrences(ptx, "st.local.v4") > 0);
  CHECK(occurrences(ptx, "ld.local.v4") > 0);
  CHECK(occurrences(twin->ptx, "ld.local") == 0);
  for (const char *copy : {"cp.async.bulk.tensor", "cp.async.cg"})
    CHECK(occurrences(ptx, copy) == occurrences(twin->ptx, copy));
  std::printf("%-60s regs %3d spill %5d B (short: regs %3d spill %5d B)\n",
              long_.name().c_str(), artifacts->registers, artifacts->spillBytes,
              twin->registers, twin->spillBytes);
}

// A family's slice for one kind: every spec checked, and as many as the family has per kind.
void checkSlice(std::vector<compiler::KernelSpec> (*specs)(bob::KernelKind),
                void (*check)(const compiler::KernelSpec &), bob::KernelKind kind,
                size_t expected) {
  size_t variants = 0;
  for (const compiler::KernelSpec &spec : specs(kind)) {
    check(spec);
    ++variants;
  }
  CHECK(variants == expected);
}
} // namespace

// The test cases of one kind, each named and tagged with it, so that each CTest slice runs one
// kind's variants of every family; declared kind by kind (Catch2 runs them in this order), so
// that a whole run keeps the compiled kernels of one kind at a time.
#define PTX_CASE(title, specs, check, count, kind)                                               \
  TEST_CASE(title " (" #kind ")", "[compiler][ptx][" #kind "]") {                                \
    checkSlice(specs, check, bob::KernelKind::kind, count);                                      \
  }
#define PTX_KIND_CASES(kind)                                                                     \
  PTX_CASE("every kernel variant assembles with ptxas and uses tensor cores", matrixSpecs,       \
           checkMatrixVariant, 16 * kConfigurations, kind)                                       \
  PTX_CASE("kernels with a producer warpgroup assemble with setmaxnreg and consumer barriers",  \
           producerSpecs, checkProducerVariant, 4, kind)                                         \
  PTX_CASE("grouped-query kernels assemble and keep their twins' pipelining", groupedSpecs,      \
           checkGroupedVariant, 12, kind)                                                        \
  PTX_CASE("sliding-window kernels assemble and keep their twins' pipelining", windowedSpecs,    \
           checkWindowedVariant, 12, kind)                                                       \
  PTX_CASE("variable-length kernels assemble, keep TMA and their twins' pipelining",            \
           packedSpecs, checkPackedVariant, 12, kind)
// The kinds that flush (bob::isLongSweepKind) have long-sweep variants too.
#define PTX_LONG_CASE(kind)                                                                      \
  PTX_CASE("long-sweep kernels assemble, keep their twins' pipelining and flush through local "  \
           "memory",                                                                             \
           longSpecs, checkLongVariant, 12, kind)

PTX_KIND_CASES(fwd)
PTX_KIND_CASES(bwd_q)
PTX_LONG_CASE(bwd_q)
PTX_KIND_CASES(bwd_kv)
PTX_LONG_CASE(bwd_kv)
PTX_KIND_CASES(bob_q)
PTX_LONG_CASE(bob_q)
PTX_KIND_CASES(bob_kv)
PTX_LONG_CASE(bob_kv)
PTX_KIND_CASES(fwd_jvp)
PTX_KIND_CASES(fwd_dual)

TEST_CASE("the per-kind slices cover the matrix once", "[compiler]") {
  // What the compiling test cases check, all kinds together: as many variants as the whole
  // matrix has (336 plain, 28 producer, 84 grouped, windowed and packed, 48 long), each in the
  // slice of its own kind only. The forward and its JVP (alone or together) have no long form,
  // so no long-sweep test case. (Where the table's default tiles are the producer form, bwd_kv at d = 64 on sm_90a,
  // the two twins are one spec: each derived family checks that variant twice, as the matrix
  // always has; it is compiled once.)
  const std::pair<std::vector<compiler::KernelSpec> (*)(bob::KernelKind), size_t> families[] = {
      {matrixSpecs, 16 * kConfigurations * std::size(kImplementedKinds)},
      {producerSpecs, 4 * std::size(kImplementedKinds)},
      {groupedSpecs, 12 * std::size(kImplementedKinds)},
      {windowedSpecs, 12 * std::size(kImplementedKinds)},
      {packedSpecs, 12 * std::size(kImplementedKinds)},
      {longSpecs, 12 * 4}};
  for (auto [specs, expected] : families) {
    size_t variants = 0;
    for (bob::KernelKind kind : kImplementedKinds)
      for (const compiler::KernelSpec &spec : specs(kind)) {
        CHECK(spec.kind == kind);
        ++variants;
      }
    CHECK(variants == expected);
  }
  CHECK(longSpecs(bob::KernelKind::fwd).empty());
  CHECK(longSpecs(bob::KernelKind::fwd_jvp).empty());
  CHECK(longSpecs(bob::KernelKind::fwd_dual).empty());
}

TEST_CASE("the autotuner's space offers the producer twin of each plain configuration",
          "[compiler]") {
  for (bob::KernelKind kind : kImplementedKinds) {
    std::vector<Tiles> hopper = kernels::candidateTiles(kind, 64, Arch::sm_90a);
    for (const Tiles &t : hopper) {
      INFO(t.name());
      bool twin = false;
      for (const Tiles &o : hopper)
        twin |= o.blockM == t.blockM && o.blockN == t.blockN && o.warps == t.warps &&
                o.warpCols == t.warpCols && o.producer != t.producer;
      // Column groups have no producer form (the verifier rejects it).
      CHECK(twin == (t.warpCols == 1 && t.stages == 2));
      CHECK((t.name().find("p_s") != std::string::npos) == t.producer);
    }
    for (const Tiles &t : kernels::candidateTiles(kind, 64, Arch::sm_80))
      CHECK_FALSE(t.producer);
  }
}

TEST_CASE("tile names parse back to their tiles; FLASHBOB_TILES's entries name kind and tiles",
          "[compiler]") {
  for (bob::KernelKind kind : kImplementedKinds)
    for (Arch arch : {Arch::sm_80, Arch::sm_90a})
      for (const Tiles &t : kernels::candidateTiles(kind, 64, arch)) {
        INFO(t.name());
        std::optional<Tiles> back = Tiles::parse(t.name());
        REQUIRE(back.has_value());
        CHECK(*back == t);
      }
  for (const char *bad : {"", "m64", "m64_n64_w4", "m64_n64_w4_s", "m0_n64_w4_s2",
                          "m64_n64_w4c_s2", "m64_n64_w4_s2_", "m-64_n64_w4_s2", "64_64_4_2"})
    CHECK_FALSE(Tiles::parse(bad).has_value());
  auto parsed = kernels::parseTileOverrides("bob_kv=m48_n128_w8_s2, fwd=m128_n128_w8p_s2");
  REQUIRE(static_cast<bool>(parsed));
  REQUIRE(parsed->size() == 2);
  CHECK((*parsed)[0].first == bob::KernelKind::bob_kv);
  CHECK((*parsed)[0].second.blockN == 128);
  CHECK((*parsed)[1].second.producer);
  CHECK(kernels::parseTileOverrides("")->empty());
  for (const char *bad : {"bob_kv", "bob_kv=", "bob_kvv=m48_n128_w8_s2", "=m48_n128_w8_s2"}) {
    auto refused = kernels::parseTileOverrides(bad);
    REQUIRE_FALSE(static_cast<bool>(refused));
    CHECK_THAT(llvm::toString(refused.takeError()),
               Catch::Contains(std::string("'") + bad + "' is not kind=tiles"));
  }
}

TEST_CASE("specs the compiler cannot build are rejected before any compilation", "[compiler]") {
  compiler::KernelSpec spec;
  spec.headDim = 100;
  auto bad = jit::compileKernel(spec, false);
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK_THAT(llvm::toString(bad.takeError()), Catch::Contains("head_dim 100"));

  // Targets are an enum: text that names none is refused where it is parsed.
  CHECK_FALSE(compiler::parseArch("sm_70").has_value());
  CHECK_FALSE(compiler::parseArch("SM_90A").has_value());
  CHECK(compiler::parseArch("sm_90a") == Arch::sm_90a);

  spec = {};
  spec.tiles.blockM = 48; // 3 fragments of 16 rows cannot be split over 4 warps
  bad = jit::compileKernel(spec, false);
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK_THAT(llvm::toString(bad.takeError()), Catch::Contains("block_m 48"));
}

TEST_CASE("shared memory is known before compiling and matches the compiled kernel", "[compiler]") {
  for (Arch arch : {Arch::sm_80, Arch::sm_90a})
    for (bob::KernelKind kind : kImplementedKinds)
      for (int64_t d : {64, 128}) {
        compiler::KernelSpec spec;
        spec.kind = kind;
        spec.headDim = d;
        spec.arch = arch;
        applyTiles(spec, tiles(kind, d, 0, arch));
        INFO(spec.name());
        auto estimate = jit::sharedBytesFor(spec);
        REQUIRE(static_cast<bool>(estimate));
        auto compiled = jit::compileKernel(spec, /*assemble=*/false);
        REQUIRE(static_cast<bool>(compiled));
        const bool hopper = arch == Arch::sm_90a;
        // Static shared memory on top of the tiles: sm_90a, the TMA mbarriers' 1024-byte slot
        // (which also holds a row exchange of 512 bytes); sm_80, the row exchange of a kernel
        // with column groups that reduces rows (bob_q: 2 groups x 64 rows x 4 bytes).
        const bool groups = spec.tiles.warpCols > 1;
        const int64_t barriers =
            hopper ? 1024
                   : (groups && (kind == bob::KernelKind::bob_q || kind == bob::KernelKind::fwd_jvp ||
                                 kind == bob::KernelKind::fwd_dual)
                          ? 2 * 64 * 4
                          : 0);
        CHECK(*estimate == compiled->sharedBytes + barriers);
        // Independent count of the kernel's shared tiles. sm_80: rows padded by 16 bytes,
        // 128-byte aligned. sm_90a: unpadded (swizzled), 1024-byte aligned. Plus the scratch
        // tiles (own rows x other rows) that register operands of wgmma (or, with column
        // groups, of every product) go through.
        // Tiles loaded in the loop (the other sequence's) have one buffer per stage.
        auto tile = [&](int64_t rows, int64_t cols) -> int64_t {
          if (hopper)
            return (rows * cols * 2 + 1023) / 1024 * 1024;
          return (rows * (cols + 8) * 2 + 127) / 128 * 128;
        };
        int64_t q = tile(spec.tiles.blockM, d), k = tile(spec.tiles.blockN, d);
        (bob::isKeyMajor(kind) ? q : k) *= spec.tiles.stages;
        int64_t expected = 0;
        switch (kind) {
        case bob::KernelKind::fwd: expected = q + 2 * k; break;           // Q | K, V
        case bob::KernelKind::bwd_q: expected = 2 * q + 2 * k; break;     // Q, dO | K, V
        case bob::KernelKind::bwd_kv: expected = 2 * k + 2 * q; break;    // K, V | Q, dO
        case bob::KernelKind::bob_q: expected = 3 * q + 4 * k; break;     // Q, dO, uQ | K, V, uK, uV
        case bob::KernelKind::bob_kv: expected = 4 * k + 3 * q; break;    // K, V, uK, uV | Q, dO, uQ
        case bob::KernelKind::fwd_jvp: expected = 2 * q + 4 * k; break;   // Q, tQ | K, V, tK, tV
        case bob::KernelKind::fwd_dual: expected = 2 * q + 4 * k; break;  // Q, tQ | K, V, tK, tV
        }
        if (hopper || groups) {
          // One scratch tile per staged value: fwd P; bwd_q dS; bwd_kv P^T, dS^T; bob_q dS,
          // G o dS + P o W, P o dP, P, G o P; bob_kv dS^T, the gK term, dPbar^T; fwd_jvp P,
          // G o P; fwd_dual P~, P~ o G.
          int64_t staged = 1;
          switch (kind) {
          case bob::KernelKind::bwd_kv: staged = 2; break;
          case bob::KernelKind::bob_q: staged = 5; break;
          case bob::KernelKind::bob_kv: staged = 3; break;
          case bob::KernelKind::fwd_jvp: staged = 2; break; // P, G o P
          case bob::KernelKind::fwd_dual: staged = 2; break; // P~, P~ o G
          default: break;
          }
          const bool keyMajor = bob::isKeyMajor(kind);
          expected += staged * (keyMajor ? tile(spec.tiles.blockN, spec.tiles.blockM)
                                         : tile(spec.tiles.blockM, spec.tiles.blockN));
        }
        CHECK(*estimate == expected + barriers);
      }
}

TEST_CASE("column groups: the row exchange is counted in the shared-memory estimate",
          "[compiler]") {
  // bob_q reduces rows (D, c, b): 2 groups x 64 rows x 4 bytes in static shared memory. sm_80:
  // that alone (128-byte aligned); sm_90a: with the mbarriers (256 bytes) within one 1024-byte
  // slot ahead of the swizzled tiles.
  for (Arch arch : {Arch::sm_80, Arch::sm_90a}) {
    compiler::KernelSpec spec;
    spec.kind = bob::KernelKind::bob_q;
    spec.headDim = 128;
    spec.arch = arch;
    applyTiles(spec, tiles(spec.kind, spec.headDim, 2, arch));
    INFO(spec.name());
    auto estimate = jit::sharedBytesFor(spec);
    REQUIRE(static_cast<bool>(estimate));
    auto compiled = jit::compileKernel(spec, /*assemble=*/false);
    REQUIRE(static_cast<bool>(compiled));
    CHECK(*estimate == compiled->sharedBytes + (arch == Arch::sm_90a ? 1024 : 512));
  }
}

TEST_CASE("the default tiles are valid and fit each target's shared memory", "[compiler]") {
  // Opt-in shared memory per block: sm_80 (A100) 163 KB, sm_90a (H100/H200) 227 KB. The generic
  // column of the tile table serves sm_80 .. sm_90 and must fit the smaller one. Head dims that
  // two column groups cannot split (80, 112; 240, where fwd_dual's generic tiles have column
  // groups too) must still get valid tiles.
  const std::pair<Arch, int64_t> targets[] = {{Arch::sm_80, 166912}, {Arch::sm_90a, 232448}};
  for (auto [arch, budget] : targets) {
    CHECK(kernels::tableSharedBudget(arch) == budget);
    CHECK(bob::targetInfo(arch).sharedPerBlock == budget);
  }
  mlir::MLIRContext ctx;
  for (auto [arch, budget] : targets)
    for (bob::KernelKind kind : kImplementedKinds)
      for (int64_t d : {16, 48, 64, 80, 96, 112, 128, 192, 240, 256}) {
        compiler::KernelSpec spec = defaultSpec(kind, d, arch);
        INFO(spec.name());
        if (llvm::Error e = compiler::validate(spec, &ctx))
          FAIL(llvm::toString(std::move(e)));
        auto bytes = jit::sharedBytesFor(spec);
        REQUIRE(static_cast<bool>(bytes));
        CHECK(*bytes <= budget);
      }
}

TEST_CASE("on GPUs with less shared memory the defaults shrink until they fit", "[compiler]") {
  // sm_86 / sm_89 (RTX 30xx/40xx, L40): 99 KB opt-in per block, less than the generic column's
  // 163 KB. Every kind and head dim gets tiles the compiler builds, within the register budget,
  // whose shared memory (the compiler's own estimate, checked against compiled kernels above)
  // fits; where the defaults fit already they are kept.
  constexpr int64_t kSm86 = 101376;
  CHECK(bob::targetInfo(Arch::sm_86).sharedPerBlock == kSm86);
  CHECK(bob::targetInfo(Arch::sm_89).sharedPerBlock == kSm86);
  mlir::MLIRContext ctx;
  for (Arch arch : {Arch::sm_86, Arch::sm_89, Arch::sm_80, Arch::sm_90a})
    for (bob::KernelKind kind : kImplementedKinds)
      for (int64_t d : {16, 64, 96, 128, 256}) {
        compiler::KernelSpec spec = defaultSpec(kind, d, arch);
        INFO(spec.name());
        const int64_t limit = bob::targetInfo(arch).sharedPerBlock;
        auto tiles = jit::fitSharedMemory(spec, limit);
        if (!tiles)
          FAIL(llvm::toString(tiles.takeError()));
        compiler::KernelSpec fitted = spec;
        applyTiles(fitted, *tiles);
        INFO("fitted: " << fitted.name());
        if (llvm::Error e = compiler::validate(fitted, &ctx))
          FAIL(llvm::toString(std::move(e)));
        CHECK_FALSE(static_cast<bool>(kernels::checkRegisterFootprint(fitted)));
        auto bytes = jit::sharedBytesFor(fitted);
        REQUIRE(static_cast<bool>(bytes));
        CHECK(*bytes <= limit);
        auto original = jit::sharedBytesFor(spec);
        REQUIRE(static_cast<bool>(original));
        if (*original <= limit)
          CHECK(fitted.name() == spec.name());
        else
          CHECK(*bytes < *original);
      }
  // A limit no tiles fit: one error naming the kernel and the limit.
  compiler::KernelSpec spec = defaultSpec(bob::KernelKind::bob_q, 256, Arch::sm_86);
  auto none = jit::fitSharedMemory(spec, 16384);
  REQUIRE_FALSE(static_cast<bool>(none));
  std::string message = llvm::toString(none.takeError());
  CHECK_THAT(message, Catch::Contains("bob_q_d256"));
  CHECK_THAT(message, Catch::Contains("16384 bytes of shared memory"));
}
