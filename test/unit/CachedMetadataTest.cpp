// The launch facts of a disk-cache entry must equal the ones derived from the kernel spec before
// anything is launched from them: metadata.json edited in any launch fact (shared bytes, a
// tensor map swapped, shrunk, repeated or dropped, ...) is refused with an error naming it.
// The truth is the full compile's facts (what the compiler records when it stores an entry);
// the front stage that derives them on every lookup must give exactly those.
#include "jit/CachedMetadata.h"
#include "jit/Compile.h"
#include "kernels/TileTable.h"
#include "runtime/launch/TensorMaps.h"

#include <catch2/catch.hpp>

#include <utility>

using namespace flashbob;
using Kind = bob::KernelKind;

namespace {

compiler::KernelSpec specOf(Kind kind, int64_t headDim, bob::Arch arch) {
  compiler::KernelSpec spec;
  spec.kind = kind;
  spec.headDim = headDim;
  spec.arch = arch;
  spec.tiles = kernels::defaultTiles(kind, headDim, arch);
  return spec;
}

// The facts the compiler records for `spec` (the full compile, no ptxas).
compiler::LaunchFacts compiledFacts(const compiler::KernelSpec &spec) {
  auto artifacts = jit::compileKernel(spec, /*assemble=*/false);
  REQUIRE(static_cast<bool>(artifacts));
  return std::move(static_cast<compiler::LaunchFacts &>(*artifacts));
}

// metadata.json's "metadata" as jit/KernelCache stores it.
llvm::json::Object metadataOf(const compiler::LaunchFacts &facts) {
  return llvm::json::Object{{"name", facts.entry},
                            {"entry", facts.entry},
                            {"threads", facts.threads},
                            {"shared_bytes", facts.sharedBytes},
                            {"tensor_maps", runtime::tensorMapsToJson(facts.tensorMaps)},
                            {"registers", 168}};
}

// Why the entry's metadata is refused for `spec`, or "" when it is accepted.
std::string rejection(const llvm::json::Object &meta, const compiler::LaunchFacts &derived) {
  llvm::Error e = jit::validateCachedMetadata(meta, derived);
  return e ? llvm::toString(std::move(e)) : "";
}

// The index of the map over memref `tensor` in `maps`.
size_t mapOver(const std::vector<support::TensorMapSpec> &maps, unsigned tensor) {
  for (size_t i = 0; i < maps.size(); ++i)
    if (maps[i].tensorArg == tensor)
      return i;
  FAIL("no tensor map over memref " << tensor);
  return 0;
}

} // namespace

TEST_CASE("the front stage derives exactly the facts the full compile records",
          "[cached-metadata]") {
  for (bob::Arch arch : {bob::Arch::sm_90a, bob::Arch::sm_80})
    for (int64_t d : {64, 128})
      for (Kind kind : {Kind::fwd, Kind::bwd_q, Kind::bwd_kv, Kind::bob_q, Kind::bob_kv}) {
        const compiler::KernelSpec spec = specOf(kind, d, arch);
        INFO(spec.name());
        auto front = jit::compileFront(spec);
        REQUIRE(static_cast<bool>(front));
        const compiler::LaunchFacts &derived = front->artifacts;
        const compiler::LaunchFacts compiled = compiledFacts(spec);
        CHECK(derived.entry == compiled.entry);
        CHECK(derived.threads == compiled.threads);
        CHECK(derived.sharedBytes == compiled.sharedBytes);
        CHECK(derived.tensorMaps == compiled.tensorMaps);
        CHECK(derived.sharedBytes > 0);
        CHECK(derived.tensorMaps.empty() == (arch == bob::Arch::sm_80));
        // What a hit checks: the recorded facts of a sound entry pass.
        CHECK(rejection(metadataOf(compiled), derived).empty());
      }
}

TEST_CASE("each tampered launch fact is refused, naming it", "[cached-metadata]") {
  // The forward at d = 128 on sm_90a: a producer warpgroup, TMA maps over q, k and v (and the
  // staged store of o).
  const compiler::KernelSpec spec = specOf(Kind::fwd, 128, bob::Arch::sm_90a);
  const compiler::LaunchFacts truth = compiledFacts(spec);
  REQUIRE(truth.tensorMaps.size() >= 3);
  auto front = jit::compileFront(spec);
  REQUIRE(static_cast<bool>(front));
  const compiler::LaunchFacts &derived = front->artifacts;

  auto edited = [&](const char *field, llvm::json::Value value) {
    llvm::json::Object meta = metadataOf(truth);
    meta[field] = std::move(value);
    return rejection(meta, derived);
  };
  CHECK_THAT(edited("entry", "other_kernel"), Catch::Contains("entry = 'other_kernel'"));
  CHECK_THAT(edited("threads", truth.threads / 3),
             Catch::Contains("threads = " + std::to_string(truth.threads / 3) + ", but " +
                             spec.name() + " runs " + std::to_string(truth.threads)));
  CHECK_THAT(edited("threads", "384"), Catch::Contains("no \"threads\" integer"));
  // Within the target's bound, which is all that was checked before.
  CHECK_THAT(edited("shared_bytes", 1024),
             Catch::Contains("shared_bytes = 1024, but " + spec.name() + " uses " +
                             std::to_string(truth.sharedBytes)));
  CHECK_THAT(edited("shared_bytes", truth.sharedBytes + 1024),
             Catch::Contains("shared_bytes = " + std::to_string(truth.sharedBytes + 1024)));
  CHECK_THAT(edited("tensor_maps", nullptr), Catch::Contains("tensor_maps"));

  // Tensor maps: each edit is TMA-legal and names the kernel's own memrefs.
  auto maps = [&](std::vector<support::TensorMapSpec> m) {
    return edited("tensor_maps", runtime::tensorMapsToJson(m));
  };
  const size_t k = mapOver(truth.tensorMaps, 1), v = mapOver(truth.tensorMaps, 2);
  std::vector<support::TensorMapSpec> swapped = truth.tensorMaps;
  std::swap(swapped[k], swapped[v]);
  CHECK_THAT(maps(swapped), Catch::Contains("tensor_maps[" + std::to_string(std::min(k, v)) +
                                            "] = (memref " +
                                            std::to_string(k < v ? 2 : 1)));
  std::vector<support::TensorMapSpec> halved = truth.tensorMaps;
  halved[0].boxRows /= 2;
  CHECK_THAT(maps(halved), Catch::Contains("tensor_maps[0] = ") &&
                               Catch::Contains("box " + std::to_string(halved[0].boxRows) + " x"));
  std::vector<support::TensorMapSpec> repeated = truth.tensorMaps;
  repeated[1] = repeated[0];
  CHECK_THAT(maps(repeated), Catch::Contains("tensor_maps[1] = "));
  std::vector<support::TensorMapSpec> dropped = truth.tensorMaps;
  dropped.pop_back();
  CHECK_THAT(maps(dropped), Catch::Contains(std::to_string(dropped.size()) + " tensor maps, but " +
                                            spec.name() + " takes " +
                                            std::to_string(truth.tensorMaps.size())));
  std::vector<support::TensorMapSpec> added = truth.tensorMaps;
  added.push_back(added.back());
  CHECK_THAT(maps(added), Catch::Contains(" tensor maps, but "));
  // Each field of one map.
  for (unsigned field = 0; field < 6; ++field) {
    std::vector<support::TensorMapSpec> one = truth.tensorMaps;
    unsigned *fields[] = {&one[0].tensorArg, &one[0].rowsArg,      &one[0].boxRows,
                          &one[0].boxCols,   &one[0].swizzleBytes, &one[0].elementBytes};
    *fields[field] = *fields[field] == 2 ? 4 : 2;
    INFO("field " << field);
    CHECK_THAT(maps(one), Catch::Contains("tensor_maps[0] = "));
  }
}

TEST_CASE("no tensor maps on a target without TMA", "[cached-metadata]") {
  const compiler::KernelSpec spec = specOf(Kind::fwd, 64, bob::Arch::sm_80);
  const compiler::LaunchFacts truth = compiledFacts(spec);
  REQUIRE(truth.tensorMaps.empty());
  auto front = jit::compileFront(spec);
  REQUIRE(static_cast<bool>(front));
  llvm::json::Object meta = metadataOf(truth);
  CHECK(rejection(meta, front->artifacts).empty());
  meta["tensor_maps"] = runtime::tensorMapsToJson({{0, 0, 64, 64, 128, 2}});
  CHECK_THAT(rejection(meta, front->artifacts), Catch::Contains("1 tensor maps, but"));
}
