#include "support/Knobs.h"

#include "support/Errors.h"
#include "support/Integers.h"
#include "support/Log.h"

#include "llvm/ADT/StringExtras.h"

#include <array>
#include <cstdlib>
#include <mutex>

namespace flashbob::support {

namespace {

// The one declaration of every variable. Keep the order of `enum class Knob`.
const KnobInfo kKnobs[] = {
    {Knob::CacheDir, "FLASHBOB_CACHE_DIR", KnobType::Path, "",
     "Directory of the kernel cache and tuning records; unset: $XDG_CACHE_HOME/flashbob, else "
     "~/.cache/flashbob, else /tmp/flashbob-cache-<uid>. Created 0700; used only if it belongs to "
     "this user and nobody else can write it. A relative path is made absolute when the cache "
     "opens."},
    {Knob::CacheMaxMB, "FLASHBOB_CACHE_MAX_MB", KnobType::UInt, "2048",
     "Size bound of the kernel cache in MiB, enforced after each store by removing the least "
     "recently used entries; 0: no bound."},
    {Knob::CudaDriver, "FLASHBOB_CUDA_DRIVER", KnobType::Path, "libcuda.so.1",
     "The CUDA driver library to dlopen (tests name a missing one to check the no-driver path)."},
    {Knob::Autotune, "FLASHBOB_AUTOTUNE", KnobType::Bool, "0",
     "Time the candidate tiles of each kernel on first use and persist the winner in the cache "
     "directory (like flashbob_set_autotune(1) or `flashbob run --tune`)."},
    {Knob::PrintAutotuning, "FLASHBOB_PRINT_AUTOTUNING", KnobType::Bool, "0",
     "Print every autotuning candidate's time and the choice to stderr (`flashbob tune` turns "
     "it on); log callbacks receive these lines at debug level either way."},
    {Knob::Arch, "FLASHBOB_ARCH", KnobType::String, "",
     "Target to build for instead of the GPU's own, e.g. sm_90 on Hopper for the generic "
     "mma.sync/cp.async path; a target the GPU cannot run is refused."},
    {Knob::Producer, "FLASHBOB_PRODUCER", KnobType::TriState, "",
     "1/0 forces warp specialization on/off for two-stage sm_90a kernels without column groups "
     "(A/B timing, GPU tests); unset: the tile table decides."},
    {Knob::Ptxas, "FLASHBOB_PTXAS", KnobType::Path, "",
     "The ptxas to run; unset: <CUDA root>/bin/ptxas ($CUDA_HOME, $CUDA_PATH, the build's "
     "FLASHBOB_CUDA_ROOT), then $PATH."},
    {Knob::PtxasTimeoutS, "FLASHBOB_PTXAS_TIMEOUT_S", KnobType::UInt, "300",
     "Seconds each run of ptxas may take before it is killed and the compile fails saying so "
     "(the largest kernels take a few seconds); 0: no limit."},
    {Knob::Assembler, "FLASHBOB_ASSEMBLER", KnobType::String, "",
     "How PTX becomes machine code: nvjitlink (in process), ptxas (the toolkit's binary) or "
     "driver (the CUDA driver's JIT at load); unset: ptxas if FLASHBOB_PTXAS names one or one is "
     "found that runs, else driver. nvjitlink only when named: 13.0 ignores setmaxnreg, and the "
     "warp-specialized kernels run 8-29% slower on the H200."},
    {Knob::NvJitLink, "FLASHBOB_NVJITLINK", KnobType::Path, "",
     "The nvJitLink library to dlopen; unset: libnvJitLink.so.13 on the loader's path, then "
     "<CUDA root>/lib64 ($CUDA_HOME, $CUDA_PATH, the build's FLASHBOB_CUDA_ROOT)."},
    {Knob::DumpDir, "FLASHBOB_DUMP_DIR", KnobType::Path, "",
     "Where `flashbob compile` (without --dump-dir) and `flashbob demo` without a GPU write "
     "every stage of the kernels they compile."},
    {Knob::Cublas, "FLASHBOB_CUBLAS", KnobType::Path, "",
     "The cuBLAS library `flashbob bench` measures its matmul ceiling with; unset: "
     "libcublas.so.13, .so.12, .so."},
    {Knob::CheckOffsets, "FLASHBOB_CHECK_OFFSETS", KnobType::Bool, "1",
     "Read a packed batch's cu_seqlens back and check them before each call (a wait for the "
     "stream's earlier work); 0 skips it for training loops that must not wait, the kernels "
     "then only keep every access inside the tensors."},
    {Knob::LongSweep, "FLASHBOB_LONG_SWEEP", KnobType::TriState, "",
     "1/0 forces the backward's and BoB's kernels that flush their accumulators periodically "
     "on/off for every sweep length (A/B timing and accuracy); unset: sweeps of 2^17 rows or "
     "more flush, shorter ones do not (docs/numerics.md, long sequences)."},
    {Knob::RegisterA, "FLASHBOB_REGISTER_A", KnobType::Bool, "1",
     "1 (default): sm_90a products whose A operand is a register tile (P, dS, ...) read it from "
     "registers (wgmma register-A) where its layout allows (kernels named _rega); 0 stages every "
     "such operand through shared memory instead (the A/B of docs/performance.md)."},
    {Knob::FusedBackward, "FLASHBOB_FUSED_BACKWARD", KnobType::Bool, "0",
     "1: on sm_90a (head_dim <= 128 and a multiple of 16, not a ring step) the backward runs "
     "fused: bwd_dot, one key-major bwd_fused that adds dQ into an f32 sum in a fixed order, "
     "bwd_dq, with a workspace the library allocates on the stream. Exact (float64 checks pass "
     "on an H100) but 2.4x (d = 64) to 3.1x (d = 128) slower than the two kernels today: off by "
     "default."},
    {Knob::PadInKernel, "FLASHBOB_PAD_IN_KERNEL", KnobType::Bool, "1",
     "1 (default): a head dim that is a multiple of 8 but not of 16 runs kernels 8 columns wider "
     "than their tensors, which read the extra columns as zeros (kernels named _t<d>); 0 copies "
     "those tensors into zero-padded memory around the kernels instead, as any other head dim "
     "that is no multiple of 16 (the A/B of docs/performance.md, \"Head dims\")."},
    {Knob::Tiles, "FLASHBOB_TILES", KnobType::String, "",
     "Tiles instead of the tile table's for the kernel kinds named, at every head dim: "
     "comma-separated kind=tiles, the tiles as kernel names spell them (bob_kv=m48_n128_w8_s2; "
     "w8c2: two column groups, w4p: a producer warpgroup); for timing a configuration. A "
     "malformed value is ignored with a warning, tiles the compiler refuses fail the call."},
    {Knob::Library, "FLASHBOB_LIBRARY", KnobType::Path, "",
     "Path of libflashbob.so for the Python package; unset: next to the package, then the "
     "repository's build/lib.",
     KnobReader::Python},
    {Knob::JaxFfi, "FLASHBOB_JAX_FFI", KnobType::String, "",
     "The XLA FFI handlers flashbob.jax registers: unset, those built into libflashbob.so where "
     "the installed jaxlib's FFI C API is 0.x with x >= 1, else the shim compiled on first use "
     "(docs/jax.md); `prebuilt` or `shim` forces one.",
     KnobReader::Python},
    {Knob::PtxSnapshotDir, "FLASHBOB_PTX_SNAPSHOT_DIR", KnobType::Path, "",
     "ptx_matrix_test also writes every variant's PTX there as <name>.ptx, to show a "
     "refactoring byte-identical (`diff -r before/ after/`).",
     KnobReader::Tests},
    {Knob::OracleReport, "FLASHBOB_ORACLE_REPORT", KnobType::Bool, "0",
     "oracle_test prints the worst error of every check at exit.", KnobReader::Tests},
};
constexpr size_t kKnobCount = sizeof(kKnobs) / sizeof(kKnobs[0]);
static_assert(kKnobCount == size_t(Knob::OracleReport) + 1, "one table row per Knob, in order");

struct KnobState {
  bool environmentRead = false;
  std::optional<std::string> environment;
  std::optional<std::string> override;
  bool warned = false; // the malformed-value warning is given once per knob
};

struct State {
  std::mutex mutex;
  std::array<KnobState, kKnobCount> knobs;
};

State &state() {
  static State s; // function-local: knobs may be read during other statics' initialization
  return s;
}

std::optional<std::string> rawValueLocked(KnobState &k, const KnobInfo &info) {
  if (!k.environmentRead) {
    k.environmentRead = true;
    if (const char *v = std::getenv(info.name.data()); v && *v)
      k.environment = v;
  }
  const std::optional<std::string> &value = k.override ? k.override : k.environment;
  if (!value || value->empty())
    return std::nullopt;
  return value;
}

std::optional<bool> parseBool(llvm::StringRef text) {
  std::string lower = text.trim().lower();
  if (lower == "1" || lower == "true" || lower == "on" || lower == "yes")
    return true;
  if (lower == "0" || lower == "false" || lower == "off" || lower == "no")
    return false;
  return std::nullopt;
}

// Surrounding spaces aside (a value pasted with its newline), the CLI's rules (Integers.h).
std::optional<uint64_t> parseUInt(llvm::StringRef text) {
  return parseInteger<uint64_t>(text.trim());
}

// Why a value does not parse, or "" when it does.
std::string problemWith(const KnobInfo &info, llvm::StringRef text) {
  switch (info.type) {
  case KnobType::Bool:
  case KnobType::TriState:
    return parseBool(text) ? "" : "is not a boolean (1/0, true/false, on/off, yes/no)";
  case KnobType::UInt:
    return integerProblem<uint64_t>(text.trim());
  case KnobType::String:
  case KnobType::Path:
    return "";
  }
  return "";
}

// The knob's value if it parses; otherwise nullopt, after a one-time warning.
std::optional<std::string> parsedValue(Knob knob) {
  const KnobInfo &info = knobInfo(knob);
  std::optional<std::string> value;
  std::string problem;
  {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    KnobState &k = s.knobs[size_t(knob)];
    value = rawValueLocked(k, info);
    if (!value)
      return std::nullopt;
    problem = problemWith(info, *value);
    if (problem.empty())
      return value;
    if (k.warned)
      return std::nullopt;
    k.warned = true;
  }
  // Outside the lock: a log callback may read knobs.
  log(LogLevel::Warning, "flashbob: warning: " + info.name + "='" + *value + "' " + problem +
                             (info.defaultValue.empty() ? llvm::Twine("; ignoring it")
                                                        : "; using the default " + info.defaultValue));
  return std::nullopt;
}

} // namespace

llvm::ArrayRef<KnobInfo> allKnobs() { return kKnobs; }

const KnobInfo &knobInfo(Knob knob) { return kKnobs[size_t(knob)]; }

llvm::StringRef knobTypeName(KnobType type) {
  switch (type) {
  case KnobType::Bool:
    return "bool";
  case KnobType::TriState:
    return "bool or unset";
  case KnobType::UInt:
    return "uint";
  case KnobType::String:
    return "string";
  case KnobType::Path:
    return "path";
  }
  return "?";
}

std::optional<std::string> rawValue(Knob knob) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return rawValueLocked(s.knobs[size_t(knob)], knobInfo(knob));
}

void setOverride(Knob knob, llvm::StringRef value) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  KnobState &k = s.knobs[size_t(knob)];
  k.override = value.str();
  k.warned = false; // a new value deserves its own warning
}

void clearOverride(Knob knob) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  KnobState &k = s.knobs[size_t(knob)];
  k.override.reset();
  k.warned = false;
}

llvm::Error checkValue(Knob knob) {
  const KnobInfo &info = knobInfo(knob);
  std::optional<std::string> value = rawValue(knob);
  if (!value)
    return llvm::Error::success();
  std::string problem = problemWith(info, *value);
  if (problem.empty())
    return llvm::Error::success();
  return makeInvalidArgument(info.name, info.name + "='" + *value + "' " + problem);
}

bool getBool(Knob knob) {
  std::optional<std::string> value = parsedValue(knob);
  return *parseBool(value ? llvm::StringRef(*value) : llvm::StringRef(knobInfo(knob).defaultValue));
}

std::optional<bool> getTriState(Knob knob) {
  std::optional<std::string> value = parsedValue(knob);
  llvm::StringRef text = value ? llvm::StringRef(*value) : llvm::StringRef(knobInfo(knob).defaultValue);
  if (text.empty())
    return std::nullopt;
  return parseBool(text);
}

uint64_t getUInt(Knob knob) {
  std::optional<std::string> value = parsedValue(knob);
  return *parseUInt(value ? llvm::StringRef(*value) : llvm::StringRef(knobInfo(knob).defaultValue));
}

std::string getString(Knob knob) {
  std::optional<std::string> value = parsedValue(knob);
  return value ? *value : knobInfo(knob).defaultValue.str();
}

} // namespace flashbob::support
