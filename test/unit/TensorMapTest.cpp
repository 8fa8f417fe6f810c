// The launcher's tensor maps without a GPU: the parameters handed to cuTensorMapEncodeTiled for a
// kernel's tensor-map specs over the memrefs of a launch (TMA's innermost-first order, byte
// strides, the box, the bound taken from another argument), the errors for launches that do not
// fit, the metadata round trip through JSON (what the disk cache stores), and how a launch's
// parameters carry the maps by value.
#include "runtime/launch/Kernel.h"
#include "runtime/launch/TensorMaps.h"

#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <catch2/catch.hpp>

using namespace flashbob::runtime;

namespace {
// A (batch, heads, rows, d) memref with the given element strides.
MemRefArg tensor(CUdeviceptr base, int64_t b, int64_t h, int64_t rows, int64_t d,
                 std::array<int64_t, 4> strides) {
  return {base, {b, h, rows, d}, {strides[0], strides[1], strides[2], strides[3]}};
}
MemRefArg contiguous(CUdeviceptr base, int64_t b, int64_t h, int64_t rows, int64_t d) {
  return tensor(base, b, h, rows, d, {h * rows * d, rows * d, d, 1});
}
} // namespace

TEST_CASE("tensor map parameters follow TMA's order: head_dim, seq, heads, batch") {
  // Q of 2 x 3 x 100 x 128 bf16, a 64-row box of 64 columns (one 128-byte swizzle block).
  std::vector<MemRefArg> args = {contiguous(0x10000, 2, 3, 100, 128)};
  TensorMapSpec spec{0, 0, 64, 64, 128, 2};
  auto p = tensorMapParams(spec, args);
  REQUIRE(static_cast<bool>(p));
  CHECK(p->address == 0x10000);
  CHECK(p->dims[0] == 128);
  CHECK(p->dims[1] == 100);
  CHECK(p->dims[2] == 3);
  CHECK(p->dims[3] == 2);
  CHECK(p->strides[0] == 128 * 2);           // next row
  CHECK(p->strides[1] == 100 * 128 * 2);     // next head
  CHECK(p->strides[2] == 3 * 100 * 128 * 2); // next batch
  CHECK(p->box[0] == 64);
  CHECK(p->box[1] == 64);
  CHECK(p->box[2] == 1);
  CHECK(p->box[3] == 1);
  CHECK(p->swizzleBytes == 128);
  CHECK(p->elementBytes == 2);
}

TEST_CASE("a (batch, seq, heads, d) layout keeps its strides, not sorted by size") {
  // PyTorch's q.transpose(1, 2): heads are d apart, rows heads * d apart.
  const int64_t b = 2, h = 3, n = 100, d = 64;
  std::vector<MemRefArg> args = {tensor(0x20000, b, h, n, d, {n * h * d, d, h * d, 1})};
  auto p = tensorMapParams({0, 0, 32, 64, 128, 2}, args);
  REQUIRE(static_cast<bool>(p));
  CHECK(p->strides[0] == static_cast<cuuint64_t>(h * d * 2));
  CHECK(p->strides[1] == static_cast<cuuint64_t>(d * 2));
  CHECK(p->strides[2] == static_cast<cuuint64_t>(n * h * d * 2));
  CHECK(p->box[1] == 32);
}

TEST_CASE("the sequence length comes from the bounding argument") {
  // dO read with Q's length (bob_kv's query loads): rows_of names Q.
  std::vector<MemRefArg> args = {contiguous(0x1000, 1, 2, 300, 64), contiguous(0x9000, 1, 2, 300, 64),
                                 contiguous(0xA000, 1, 2, 200, 64)};
  auto p = tensorMapParams({1, 0, 64, 64, 128, 2}, args);
  REQUIRE(static_cast<bool>(p));
  CHECK(p->address == 0x9000);
  CHECK(p->dims[1] == 300);
  // A shorter bound is fine (rows past it read as zero)...
  auto shorter = tensorMapParams({0, 2, 64, 64, 128, 2}, args);
  REQUIRE(static_cast<bool>(shorter));
  CHECK(shorter->dims[1] == 200);
  // ...a longer one would read past the tensor.
  auto longer = tensorMapParams({2, 0, 64, 64, 128, 2}, args);
  REQUIRE(!longer);
  CHECK(llvm::toString(longer.takeError()) ==
        "tensor map over memref argument 2: bounded by 300 rows (of argument 0) but it has 200");
}

TEST_CASE("launches that do not fit a tensor map are refused, naming the argument") {
  std::vector<MemRefArg> args = {contiguous(0x1000, 1, 1, 64, 64),
                                 {0x2000, {1, 1, 64}, {64, 64, 1}},
                                 tensor(0x3000, 1, 1, 64, 64, {8192, 8192, 128, 2})};
  auto outOfRange = tensorMapParams({3, 0, 64, 64, 128, 2}, args);
  REQUIRE(!outOfRange);
  CHECK(llvm::toString(outOfRange.takeError()) ==
        "tensor map over memref argument 3 (rows of 0): the launch passed 3 memref arguments");
  auto rank3 = tensorMapParams({1, 0, 64, 64, 128, 2}, args);
  REQUIRE(!rank3);
  CHECK(llvm::toString(rank3.takeError()) ==
        "tensor map over memref argument 1: expected a rank-4 (batch, heads, seq, head_dim) tensor");
  auto strided = tensorMapParams({2, 0, 64, 64, 128, 2}, args);
  REQUIRE(!strided);
  CHECK(llvm::toString(strided.takeError()) ==
        "tensor map over memref argument 2: head_dim stride is 2, TMA needs 1");
}

TEST_CASE("tensor-map specs survive the metadata round trip; malformed ones are a miss") {
  std::vector<TensorMapSpec> maps = {{0, 0, 64, 64, 128, 2}, {1, 0, 32, 32, 64, 2}};
  llvm::json::Array json = tensorMapsToJson(maps);
  // Through text, as the disk cache stores it.
  std::string text = llvm::formatv("{0}", llvm::json::Value(std::move(json))).str();
  auto parsed = llvm::json::parse(text);
  REQUIRE(static_cast<bool>(parsed));
  auto back = tensorMapsFromJson(parsed->getAsArray());
  REQUIRE(back.has_value());
  REQUIRE(back->size() == 2);
  CHECK((*back)[1].tensorArg == 1);
  CHECK((*back)[1].boxRows == 32);
  CHECK((*back)[1].swizzleBytes == 64);
  CHECK((*back)[0].elementBytes == 2);

  CHECK(tensorMapsFromJson(nullptr) == std::nullopt); // an entry written before tensor maps
  llvm::json::Array empty;
  auto none = tensorMapsFromJson(&empty); // a kernel without TMA
  REQUIRE(none.has_value());
  CHECK(none->empty());
  llvm::json::Array shortRow{llvm::json::Array{0, 0, 64, 64, 128}};
  CHECK(tensorMapsFromJson(&shortRow) == std::nullopt);
  llvm::json::Array negative{llvm::json::Array{0, -1, 64, 64, 128, 2}};
  CHECK(tensorMapsFromJson(&negative) == std::nullopt);
  llvm::json::Array text6{llvm::json::Array{0, 0, "64", 64, 128, 2}};
  CHECK(tensorMapsFromJson(&text6) == std::nullopt);
}

TEST_CASE("a launch's parameters: memref values and f32 scalars, then the tensor maps by value") {
  KernelArgs args;
  args.addMemRef(0x1000, {1, 2, 64, 64}, {8192, 4096, 64, 1});
  args.addF32(0.125f);
  llvm::MutableArrayRef<CUtensorMap> maps = args.tensorMaps(2);
  REQUIRE(maps.size() == 2);
  // Each pointer is to the value itself: 11 memref values (ptr, ptr, offset, 4 sizes, 4
  // strides), the scalar's 4 bytes, then each 128-byte map (CUtensorMap's own alignment).
  llvm::SmallVector<void *, 160> params = args.pointers();
  llvm::SmallVector<uint32_t, 160> sizes = args.sizes();
  REQUIRE(params.size() == 14);
  REQUIRE(sizes.size() == 14);
  CHECK(*static_cast<uint64_t *>(params[0]) == 0x1000);
  CHECK(*static_cast<uint64_t *>(params[5]) == 64);
  CHECK(*static_cast<uint64_t *>(params[7]) == 8192);
  CHECK(sizes[10] == 8);
  CHECK(*static_cast<float *>(params[11]) == 0.125f);
  CHECK(sizes[11] == 4);
  CHECK(params[12] == &maps[0]);
  CHECK(params[13] == &maps[1]);
  CHECK(sizes[12] == 128);
  CHECK(reinterpret_cast<uintptr_t>(params[12]) % 64 == 0);
  CHECK(reinterpret_cast<uintptr_t>(params[13]) % 64 == 0);
  // Asking again resizes (a launch sets the count it needs); past the room there is none.
  CHECK(args.tensorMaps(1).size() == 1);
  CHECK(args.pointers().size() == 13);
  CHECK(args.tensorMaps(kMaxTensorMaps + 1).empty());
}
