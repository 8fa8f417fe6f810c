// The XLA FFI handlers in libflashbob.so (api/XlaFfi.cpp), on the CPU through the fake CUDA
// driver: call frames laid out as api/XlaFfiAbi.h declares XLA's (that those declarations are
// XLA's is checked against jaxlib's header on the GPU machine, test/python/test_jax_attention.py),
// with a fake API table that records the errors the handlers make. Each handler must launch
// exactly what the C API launches for the problem and tensors that flashbob.jax's layout
// (batch, seq, heads, d) means, built here by hand; XLA's metadata query must be answered
// without a launch; bad frames must come back as errors naming what is wrong, nothing launched.
#include "api/XlaFfiAbi.h"
#include "api/flashbob.h"
#include "test/fake_driver/FakeCudaDriver.h"
#include "test/unit/FakeDriverRecorder.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace xf = flashbob::xla_ffi;
using namespace flashbob;
using namespace flashbob::fake_driver;

namespace {

bool sameLaunch(const fake_cuda_launch_record &a, const fake_cuda_launch_record &b) {
  return std::strcmp(a.entry, b.entry) == 0 && std::memcmp(a.grid, b.grid, sizeof a.grid) == 0 &&
         std::memcmp(a.block, b.block, sizeof a.block) == 0 && a.sharedBytes == b.sharedBytes &&
         a.params == b.params && a.tensorMaps == b.tensorMaps &&
         a.scalarCount == b.scalarCount &&
         std::memcmp(a.scalars, b.scalars, sizeof a.scalars) == 0 &&
         std::memcmp(a.maps, b.maps, sizeof(a.maps[0]) * std::min(a.tensorMaps, 16u)) == 0 &&
         a.wordCount == b.wordCount &&
         std::memcmp(a.words, b.words, sizeof(a.words[0]) * std::min(a.wordCount, 256u)) == 0;
}

// The fake XLA: its API table's error constructor records each error; its stream is a token.
struct RecordedError {
  int code;
  std::string message;
};
std::vector<RecordedError> errors;
int errorTokens[64];

xf::Error *createError(xf::ErrorCreateArgs *args) {
  REQUIRE(args->structSize == sizeof(xf::ErrorCreateArgs));
  errors.push_back({args->code, args->message});
  return reinterpret_cast<xf::Error *>(&errorTokens[errors.size() % 64]);
}

void *const kStream = reinterpret_cast<void *>(0x5000);
xf::Error *getStream(xf::StreamGetArgs *args) {
  args->stream = kStream;
  return nullptr;
}

const xf::Api kApi = [] {
  xf::Api api{};
  api.structSize = sizeof(xf::Api);
  api.version = {sizeof(xf::ApiVersion), nullptr, 0, 1};
  api.errorCreate = createError;
  api.streamGet = getStream;
  return api;
}();

// Addresses the fake never dereferences (kernels do not run), 16-byte aligned, far apart.
void *address(int i) { return reinterpret_cast<void *>(0x1000000000ull * (i + 1)); }

// One call frame and the storage it points into.
struct Frame {
  struct Buf {
    xf::Buffer buffer;
    std::vector<int64_t> dims;
  };
  std::vector<Buf> args, rets;
  std::map<std::string, std::pair<int, std::vector<char>>> attrs; // name -> (dtype, bytes)
  // Filled by build():
  std::vector<int> argTypes, retTypes, attrTypes;
  std::vector<void *> argPointers, retPointers, attrPointers;
  std::vector<xf::ByteSpan> nameSpans;
  std::vector<xf::ByteSpan *> names;
  std::vector<xf::Scalar> scalars;
  std::vector<std::string> nameText;
  xf::CallFrame frame{};

  static Buf buffer(int dtype, std::vector<int64_t> dims, void *data) {
    Buf b{{}, std::move(dims)};
    b.buffer = {sizeof(xf::Buffer), nullptr, dtype, data, 0, nullptr};
    return b;
  }
  Frame &arg(int dtype, std::vector<int64_t> dims, void *data) {
    args.push_back(buffer(dtype, std::move(dims), data));
    return *this;
  }
  Frame &ret(int dtype, std::vector<int64_t> dims, void *data) {
    rets.push_back(buffer(dtype, std::move(dims), data));
    return *this;
  }
  template <typename T> Frame &attr(const std::string &name, int dtype, T value) {
    std::vector<char> bytes(sizeof(T));
    std::memcpy(bytes.data(), &value, sizeof(T));
    attrs[name] = {dtype, bytes};
    return *this;
  }
  // The six attributes flashbob.jax passes.
  Frame &config(bool causal, double scale = 0.0, int64_t left = -1, int64_t right = -1) {
    return attr<int64_t>("causal", xf::kS64, causal)
        .attr<int64_t>("window_left", xf::kS64, left)
        .attr<int64_t>("window_right", xf::kS64, right)
        .attr<double>("scale", xf::kF64, scale)
        .attr<int64_t>("max_seqlen_q", xf::kS64, 0)
        .attr<int64_t>("max_seqlen_k", xf::kS64, 0);
  }

  void *build() {
    for (Buf &b : args) {
      b.buffer.rank = int64_t(b.dims.size());
      b.buffer.dims = b.dims.data();
      argTypes.push_back(xf::kBufferArg);
      argPointers.push_back(&b.buffer);
    }
    for (Buf &b : rets) {
      b.buffer.rank = int64_t(b.dims.size());
      b.buffer.dims = b.dims.data();
      retTypes.push_back(xf::kBufferRet);
      retPointers.push_back(&b.buffer);
    }
    nameSpans.reserve(attrs.size());
    scalars.reserve(attrs.size());
    for (auto &[name, value] : attrs) { // std::map: sorted by name, as XLA passes them
      nameText.push_back(name);
      nameSpans.push_back({nameText.back().c_str(), name.size()});
      scalars.push_back({value.first, value.second.data()});
      attrTypes.push_back(xf::kScalarAttr);
    }
    for (size_t i = 0; i < attrs.size(); ++i) {
      nameSpans[i].ptr = nameText[i].c_str();
      names.push_back(&nameSpans[i]);
      attrPointers.push_back(&scalars[i]);
    }
    frame.structSize = sizeof(xf::CallFrame);
    frame.api = &kApi;
    frame.stage = xf::kExecuteStage;
    frame.args = {sizeof(xf::Args), nullptr, int64_t(args.size()), argTypes.data(),
                  argPointers.data()};
    frame.rets = {sizeof(xf::Rets), nullptr, int64_t(rets.size()), retTypes.data(),
                  retPointers.data()};
    frame.attrs = {sizeof(xf::Attrs), nullptr, int64_t(attrs.size()), attrTypes.data(),
                   names.data(), attrPointers.data()};
    return &frame;
  }
};

// The problem's shapes: 2 x 3 heads (1 key/value head: grouped), N = 1000, M = 700, d = 64.
constexpr int64_t B = 2, H = 3, Hkv = 1, N = 1000, M = 700, D = 64;

// The C API's view of a (batch, seq, heads, d) buffer, as flashbob.jax lays them out.
flashbob_tensor seqMajor(int i, int64_t seq, int64_t heads) {
  return {address(i), {seq * heads * D, D, heads * D, 1}};
}

flashbob_problem expectedProblem(bool causal) {
  flashbob_problem p = FLASHBOB_PROBLEM_INIT;
  p.batch = B;
  p.heads = H;
  p.seq_q = N;
  p.seq_k = M;
  p.head_dim = D;
  p.dtype = FLASHBOB_BF16;
  p.causal = causal;
  p.heads_kv = Hkv;
  return p;
}

std::vector<int64_t> qShape() { return {B, N, H, D}; }
std::vector<int64_t> kShape() { return {B, M, Hkv, D}; }
std::vector<int64_t> rowShape(int copies = 1) { return {copies * B * H * N}; }

// The operands the backward and BoB read first: q, k, v, o, lse, dO at addresses 0..5 as below.
Frame &savedOperands(Frame &f) {
  return f.arg(xf::kBF16, qShape(), address(0)).arg(xf::kBF16, kShape(), address(1))
      .arg(xf::kBF16, kShape(), address(2)).arg(xf::kBF16, qShape(), address(3))
      .arg(xf::kF32, rowShape(), address(5)).arg(xf::kBF16, qShape(), address(4));
}

// The handler's launches for frame `f`, one by one against `expected` (the C API's).
void checkSameLaunches(const std::vector<fake_cuda_launch_record> &expected,
                       void *(*handler)(void *), Frame &f) {
  CHECK(handler(f.build()) == nullptr);
  const std::vector<fake_cuda_launch_record> got = launches();
  REQUIRE(!expected.empty());
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(sameLaunch(expected[i], got[i]));
}

} // namespace

TEST_CASE("XLA's metadata query is answered with API 0.1 and no call", "[fake][xla]") {
  useFakeDriver();
  xf::Metadata metadata{};
  metadata.structSize = sizeof(xf::Metadata);
  metadata.traits = 77;
  xf::MetadataExtension extension{{sizeof(xf::MetadataExtension), xf::kMetadataExtension,
                                   nullptr},
                                  &metadata};
  for (auto handler : {flashbob_xla_forward, flashbob_xla_backward, flashbob_xla_bob,
                       flashbob_xla_forward_jvp}) {
    xf::CallFrame frame{};
    frame.structSize = offsetof(xf::CallFrame, stage); // a query frame need not be whole
    frame.extensionStart = &extension.base;
    frame.api = &kApi;
    errors.clear();
    CHECK(handler(&frame) == nullptr);
    CHECK(metadata.version.major == 0);
    CHECK(metadata.version.minor == 1);
    CHECK(metadata.version.structSize == sizeof(xf::ApiVersion));
    CHECK(metadata.traits == 0);
    CHECK(errors.empty());
  }
}

TEST_CASE("each handler launches what the C API launches for the buffers' layout", "[fake][xla]") {
  useFakeDriver();
  errors.clear();
  const bool causal = GENERATE(false, true);
  const double scale = GENERATE(0.0, 0.3);
  flashbob_problem p = expectedProblem(causal);
  p.scale = scale;
  const auto q = seqMajor(0, N, H), k = seqMajor(1, M, Hkv), v = seqMajor(2, M, Hkv),
             o = seqMajor(3, N, H), dO = seqMajor(4, N, H);
  auto *lse = static_cast<float *>(address(5)), *workspace = static_cast<float *>(address(6));
  const auto x = seqMajor(7, N, H), y = seqMajor(8, M, Hkv), z = seqMajor(9, M, Hkv),
             w = seqMajor(10, N, H);
  const auto bf16 = xf::kBF16;

  SECTION("forward") {
    REQUIRE(flashbob_forward(&p, q, k, v, o, lse, kStream) == FLASHBOB_OK);
    auto expected = launches();
    Frame f;
    f.arg(bf16, qShape(), address(0)).arg(bf16, kShape(), address(1))
        .arg(bf16, kShape(), address(2)).ret(bf16, qShape(), address(3))
        .ret(xf::kF32, rowShape(), address(5)).config(causal, scale);
    checkSameLaunches(expected, flashbob_xla_forward, f);
  }
  SECTION("backward") {
    REQUIRE(flashbob_backward(&p, q, k, v, o, dO, lse, x, y, z, workspace, kStream) ==
            FLASHBOB_OK);
    auto expected = launches();
    Frame f;
    savedOperands(f).ret(bf16, qShape(), address(7)).ret(bf16, kShape(), address(8))
        .ret(bf16, kShape(), address(9)).ret(xf::kF32, rowShape(), address(6))
        .config(causal, scale);
    checkSameLaunches(expected, flashbob_xla_backward, f);
  }
  SECTION("BoB") {
    const auto uq = seqMajor(11, N, H), uk = seqMajor(12, M, Hkv), uv = seqMajor(13, M, Hkv);
    REQUIRE(flashbob_bob(&p, q, k, v, o, dO, lse, uq, uk, uv, x, y, z, w, workspace, kStream) ==
            FLASHBOB_OK);
    auto expected = launches();
    Frame f;
    savedOperands(f).arg(bf16, qShape(), address(11)).arg(bf16, kShape(), address(12))
        .arg(bf16, kShape(), address(13)).ret(bf16, qShape(), address(7))
        .ret(bf16, kShape(), address(8)).ret(bf16, kShape(), address(9))
        .ret(bf16, qShape(), address(10)).ret(xf::kF32, rowShape(3), address(6))
        .config(causal, scale);
    checkSameLaunches(expected, flashbob_xla_bob, f);
  }
  SECTION("forward JVP") {
    const auto tq = seqMajor(11, N, H), tk = seqMajor(12, M, Hkv), tv = seqMajor(13, M, Hkv);
    REQUIRE(flashbob_forward_jvp(&p, q, k, v, o, lse, tq, tk, tv, w, kStream) == FLASHBOB_OK);
    auto expected = launches();
    Frame f;
    f.arg(bf16, qShape(), address(0)).arg(bf16, kShape(), address(1))
        .arg(bf16, kShape(), address(2)).arg(bf16, qShape(), address(3))
        .arg(xf::kF32, rowShape(), address(5)).arg(bf16, qShape(), address(11))
        .arg(bf16, kShape(), address(12)).arg(bf16, kShape(), address(13))
        .ret(bf16, qShape(), address(10)).config(causal, scale);
    checkSameLaunches(expected, flashbob_xla_forward_jvp, f);
  }
  CHECK(errors.empty());
}

TEST_CASE("a window and v of another width reach the C API", "[fake][xla]") {
  useFakeDriver();
  errors.clear();
  // v of another width runs on zero-padded copies, which the fake driver really copies: host
  // memory here.
  constexpr int64_t Dv = 128;
  std::vector<uint16_t> qs(B * N * H * D), ks(B * M * Hkv * D), vs(B * M * Hkv * Dv),
      os(B * N * H * Dv);
  std::vector<float> lse(B * H * N);
  flashbob_problem p = expectedProblem(false);
  p.sliding_window = 1;
  p.window_left = 100;
  p.window_right = 20;
  p.head_dim_v = Dv;
  const flashbob_tensor q{qs.data(), {N * H * D, D, H * D, 1}},
      k{ks.data(), {M * Hkv * D, D, Hkv * D, 1}}, v{vs.data(), {M * Hkv * Dv, Dv, Hkv * Dv, 1}},
      o{os.data(), {N * H * Dv, Dv, H * Dv, 1}};
  REQUIRE(flashbob_forward(&p, q, k, v, o, lse.data(), kStream) == FLASHBOB_OK);
  auto expected = launches();
  Frame f;
  f.arg(xf::kBF16, qShape(), qs.data()).arg(xf::kBF16, kShape(), ks.data())
      .arg(xf::kBF16, {B, M, Hkv, Dv}, vs.data()).ret(xf::kBF16, {B, N, H, Dv}, os.data())
      .ret(xf::kF32, rowShape(), lse.data()).config(false, 0.0, 100, 20);
  CHECK(flashbob_xla_forward(f.build()) == nullptr);
  auto got = launches();
  REQUIRE(!expected.empty());
  REQUIRE(expected.size() == got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(expected[i].entry);
    // The copies' memory is the call's own: compare the kernels, not their addresses.
    CHECK(std::string(expected[i].entry) == got[i].entry);
    CHECK(std::memcmp(expected[i].grid, got[i].grid, sizeof got[i].grid) == 0);
  }
  CHECK(errors.empty());
}

TEST_CASE("a packed batch: the offsets after the tensors, the longest sequences from the "
          "attributes",
          "[fake][xla]") {
  // The fake's device memory is the host's: the C API reads the offsets back from these.
  useFakeDriver();
  errors.clear();
  std::vector<int32_t> cuQ{0, 300, 300, 1000}, cuK{0, 200, 650, 700};
  flashbob_problem p = expectedProblem(true); // N and M the packed totals
  p.batch = 3;
  p.varlen = 1;
  p.cu_seqlens_q = cuQ.data();
  p.cu_seqlens_k = cuK.data();
  p.max_seqlen_q = 700;
  p.max_seqlen_k = 450;
  // (total, heads, d) memory: stride[0] is never read.
  auto packed = [](int i, int64_t heads) {
    return flashbob_tensor{address(i), {0, D, heads * D, 1}};
  };
  REQUIRE(flashbob_forward(&p, packed(0, H), packed(1, Hkv), packed(2, Hkv), packed(3, H),
                           static_cast<float *>(address(5)), kStream) == FLASHBOB_OK);
  auto expected = launches();
  // The handler's frame: q, k, v, the offsets as `offsets` elements, o, lse; causal, the longest
  // query sequence `maxQ`.
  auto frame = [&](Frame &f, int offsets, int64_t maxQ) -> Frame & {
    return f.arg(xf::kBF16, {N, H, D}, address(0)).arg(xf::kBF16, {M, Hkv, D}, address(1))
        .arg(xf::kBF16, {M, Hkv, D}, address(2)).arg(offsets, {4}, cuQ.data())
        .arg(offsets, {4}, cuK.data()).ret(xf::kBF16, {N, H, D}, address(3))
        .ret(xf::kF32, {H * N}, address(5)).config(true)
        .attr<int64_t>("max_seqlen_q", xf::kS64, maxQ)
        .attr<int64_t>("max_seqlen_k", xf::kS64, 450);
  };
  Frame f;
  checkSameLaunches(expected, flashbob_xla_forward, frame(f, xf::kS32, 700));
  CHECK(errors.empty());

  // Offsets that are not int32: refused by the handler, nothing launched.
  Frame wide;
  CHECK(flashbob_xla_forward(frame(wide, xf::kS64, 700).build()) != nullptr);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0].message, Catch::Contains("cu_seqlens_q and cu_seqlens_k must be int32"));
  // Offsets the C API refuses (a longest sequence too short): its message, nothing launched.
  errors.clear();
  Frame shortest;
  frame(shortest, xf::kS32, 699);
  CHECK(flashbob_xla_forward(shortest.build()) != nullptr);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].code == xf::kInvalidArgument);
  CHECK_THAT(errors[0].message, Catch::Contains("more than max_seqlen_q = 699"));
  CHECK(launches().empty());
}

TEST_CASE("bad frames are errors naming what is wrong, nothing launched", "[fake][xla]") {
  useFakeDriver();
  errors.clear();
  auto forwardFrame = [](Frame &f, int dtype, int64_t kvHeads) -> Frame & {
    return f.arg(dtype, qShape(), address(0)).arg(dtype, {B, M, kvHeads, D}, address(1))
        .arg(dtype, {B, M, kvHeads, D}, address(2)).ret(dtype, qShape(), address(3))
        .ret(xf::kF32, rowShape(), address(5));
  };
  struct Case {
    const char *what;
    int code;
    const char *message;
  };
  Case expected;
  Frame f;
  SECTION("float32 inputs") {
    forwardFrame(f, xf::kF32, Hkv).config(false);
    expected = {"dtype", xf::kInvalidArgument, "q must be bfloat16 or float16"};
  }
  SECTION("heads_kv not dividing heads: the C API's own message") {
    forwardFrame(f, xf::kBF16, 2).config(false);
    expected = {"heads", xf::kInvalidArgument, "heads_kv = 2 must divide heads = 3"};
  }
  SECTION("an attribute missing") {
    forwardFrame(f, xf::kBF16, Hkv).config(false);
    f.attrs.erase("scale");
    expected = {"attribute", xf::kInternal, "attribute scale is missing"};
  }
  SECTION("an attribute of another type") {
    forwardFrame(f, xf::kBF16, Hkv).config(false).attr<int64_t>("scale", xf::kS64, 1);
    expected = {"attribute type", xf::kInternal, "attribute scale is not a double"};
  }
  SECTION("a result too many") {
    forwardFrame(f, xf::kBF16, Hkv).config(false).ret(xf::kF32, rowShape(), address(6));
    expected = {"results", xf::kInternal, "expected 2 results, got 3"};
  }
  void *frame = f.build();
  INFO(expected.what);
  CHECK(flashbob_xla_forward(frame) != nullptr);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].code == expected.code);
  CHECK_THAT(errors[0].message, Catch::Contains(expected.message));
  CHECK(launches().empty());
}

TEST_CASE("a workspace smaller than the call needs is an error, nothing launched",
          "[fake][xla]") {
  useFakeDriver();
  errors.clear();
  Frame f;
  savedOperands(f).arg(xf::kBF16, qShape(), address(11)).arg(xf::kBF16, kShape(), address(12))
      .arg(xf::kBF16, kShape(), address(13)).ret(xf::kBF16, qShape(), address(7))
      .ret(xf::kBF16, kShape(), address(8)).ret(xf::kBF16, kShape(), address(9))
      .ret(xf::kBF16, qShape(), address(10)).ret(xf::kF32, rowShape(2), address(6))
      .config(false);
  CHECK(flashbob_xla_bob(f.build()) != nullptr);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0].message, Catch::Contains("workspace result is too small"));
  CHECK(launches().empty());
}

TEST_CASE("a frame older than API 0.1, and a stage other than execution", "[fake][xla]") {
  useFakeDriver();
  errors.clear();
  Frame f;
  f.arg(xf::kBF16, qShape(), address(0)).arg(xf::kBF16, kShape(), address(1))
      .arg(xf::kBF16, kShape(), address(2)).ret(xf::kBF16, qShape(), address(3))
      .ret(xf::kF32, rowShape(), address(5)).config(false);
  auto *frame = static_cast<xf::CallFrame *>(f.build());
  frame->stage = 0; // instantiation: nothing to do
  CHECK(flashbob_xla_forward(frame) == nullptr);
  CHECK(errors.empty());
  frame->structSize = offsetof(xf::CallFrame, stage);
  CHECK(flashbob_xla_forward(frame) != nullptr);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0].message, Catch::Contains("older than API 0.1"));
  CHECK(launches().empty());
}
