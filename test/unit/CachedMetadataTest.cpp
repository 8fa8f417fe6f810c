// The launch facts of a disk-cache entry are checked against the kernel spec before anything is
// launched from them: each field edited in metadata.json is refused with an error naming it.
#include "jit/CachedMetadata.h"
#include "runtime/launch/Kernel.h"
#include "runtime/launch/TensorMaps.h"

#include <catch2/catch.hpp>

using namespace flashbob;

namespace {

compiler::KernelSpec hopperSpec(bool producer) {
  compiler::KernelSpec spec;
  spec.kind = bob::KernelKind::fwd;
  spec.arch = bob::Arch::sm_90a;
  spec.tiles.warps = 8;
  spec.tiles.producer = producer;
  return spec;
}

// What the compiler records for `spec` (jit/KernelCache stores these fields).
llvm::json::Object goodMetadata(const compiler::KernelSpec &spec, int64_t threads) {
  std::vector<support::TensorMapSpec> maps = {{0, 0, 64, 64, 128, 2}, {1, 1, 64, 64, 128, 2}};
  return llvm::json::Object{{"name", spec.name()},
                            {"entry", spec.name()},
                            {"threads", threads},
                            {"shared_bytes", 98304},
                            {"tensor_maps", runtime::tensorMapsToJson(maps)},
                            {"registers", 168}};
}

std::string rejection(const llvm::json::Object &meta, const compiler::KernelSpec &spec) {
  llvm::Expected<jit::CachedLaunch> launch = jit::validateCachedMetadata(meta, spec);
  if (launch)
    return "";
  return llvm::toString(launch.takeError());
}

} // namespace

TEST_CASE("sound metadata gives the launch facts", "[cached-metadata]") {
  const compiler::KernelSpec spec = hopperSpec(/*producer=*/true);
  CHECK(jit::specThreads(spec) == 384);
  llvm::Expected<jit::CachedLaunch> launch =
      jit::validateCachedMetadata(goodMetadata(spec, 384), spec);
  REQUIRE(static_cast<bool>(launch));
  CHECK(launch->entry == spec.name());
  CHECK(launch->threads == 384);
  CHECK(launch->sharedBytes == 98304);
  CHECK(launch->tensorMaps.size() == 2);
  CHECK(jit::specThreads(hopperSpec(false)) == 256);
}

TEST_CASE("each tampered field is refused, naming it", "[cached-metadata]") {
  const compiler::KernelSpec spec = hopperSpec(/*producer=*/true);
  auto edited = [&](const char *field, llvm::json::Value value) {
    llvm::json::Object meta = goodMetadata(spec, 384);
    meta[field] = std::move(value);
    return rejection(meta, spec);
  };
  CHECK_THAT(edited("threads", 128),
             Catch::Contains("threads = 128, but") && Catch::Contains("runs 384"));
  CHECK_THAT(edited("threads", "384"), Catch::Contains("no \"threads\" integer"));
  CHECK_THAT(edited("entry", "other_kernel"), Catch::Contains("entry = 'other_kernel'"));
  CHECK_THAT(edited("shared_bytes", 300000), Catch::Contains("shared_bytes = 300000, outside"));
  CHECK_THAT(edited("shared_bytes", -1), Catch::Contains("shared_bytes = -1, outside"));
  CHECK_THAT(edited("tensor_maps", nullptr), Catch::Contains("tensor_maps"));

  auto maps = [&](support::TensorMapSpec m) {
    return edited("tensor_maps", runtime::tensorMapsToJson({m}));
  };
  CHECK_THAT(maps({5, 0, 64, 64, 128, 2}), Catch::Contains("tensor_maps[0]: memref argument 5"));
  CHECK_THAT(maps({0, 9, 64, 64, 128, 2}), Catch::Contains("tensor_maps[0]: memref argument 0 (rows of 9)"));
  CHECK_THAT(maps({0, 0, 0, 64, 128, 2}), Catch::Contains("box_rows = 0"));
  CHECK_THAT(maps({0, 0, 512, 64, 128, 2}), Catch::Contains("box_rows = 512"));
  CHECK_THAT(maps({0, 0, 64, 4096, 128, 2}), Catch::Contains("box_cols = 4096"));
  CHECK_THAT(maps({0, 0, 64, 64, 100, 2}), Catch::Contains("swizzle = 100"));
  CHECK_THAT(maps({0, 0, 64, 64, 128, 3}), Catch::Contains("element_bytes = 3"));
  CHECK(maps({4, 3, 128, 32, 64, 2}).empty()); // fwd takes 5 memrefs: q, k, v, o, lse
  // ... and then its scalar (argument 5 is not a memref).
  CHECK_THAT(maps({0, 5, 64, 64, 128, 2}), Catch::Contains("(rows of 5), but fwd kernels take 5"));
  // More maps than a launch has room for would fail every launch: recompiled instead.
  std::vector<support::TensorMapSpec> many(runtime::kMaxTensorMaps + 1, {0, 0, 64, 64, 128, 2});
  CHECK_THAT(edited("tensor_maps", runtime::tensorMapsToJson(many)),
             Catch::Contains("17 tensor maps, more than a launch passes (16)"));
}

TEST_CASE("tensor maps only on a target with TMA", "[cached-metadata]") {
  compiler::KernelSpec spec = hopperSpec(/*producer=*/false);
  spec.arch = bob::Arch::sm_80;
  llvm::json::Object meta = goodMetadata(spec, 256);
  meta["shared_bytes"] = 49152;
  CHECK_THAT(rejection(meta, spec), Catch::Contains("2 tensor map(s), but sm_80 has no TMA"));
  meta["tensor_maps"] = llvm::json::Array();
  CHECK(rejection(meta, spec).empty());
}
