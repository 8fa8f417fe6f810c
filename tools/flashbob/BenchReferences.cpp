#include "tools/flashbob/BenchReferences.h"
#include "tools/flashbob/DeviceBuffer.h"

#include "support/Knobs.h"
#include "support/LibraryFile.h"

#include "runtime/launch/EventTimer.h"
#include "runtime/launch/Kernel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <vector>

#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#define FLASHBOB_HAVE_CUBLAS_HEADER 1
#endif

namespace flashbob::tool {
using runtime::CudaDriver;

namespace {
llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Best (smallest) device time of `runs` runs of `work` on the null stream (the stream the API
// calls and cuBLAS use here), in ms, after `warm` untimed ones.
llvm::Expected<double> bestTime(runtime::EventTimer &timer, int warm, int runs,
                                llvm::function_ref<llvm::Error()> work) {
  for (int i = 0; i < warm; ++i)
    if (llvm::Error e = work())
      return std::move(e);
  double bestMs = INFINITY;
  for (int i = 0; i < runs; ++i) {
    auto ms = timer.time(nullptr, work);
    if (!ms)
      return ms.takeError();
    bestMs = std::min(bestMs, *ms);
  }
  return bestMs;
}

// ---- cuBLAS through dlopen (never linked) ------------------------------------------------------
// The few ABI values we pass; checked against the header where the toolkit has it.
constexpr int kCublasOpN = 0;           // CUBLAS_OP_N
constexpr int kCudaR16BF = 14;          // CUDA_R_16BF
constexpr int kCublasCompute32F = 68;   // CUBLAS_COMPUTE_32F
constexpr int kCublasGemmDefault = -1;  // CUBLAS_GEMM_DEFAULT
#ifdef FLASHBOB_HAVE_CUBLAS_HEADER
static_assert(CUBLAS_OP_N == kCublasOpN && CUDA_R_16BF == kCudaR16BF &&
                  CUBLAS_COMPUTE_32F == kCublasCompute32F &&
                  CUBLAS_GEMM_DEFAULT == kCublasGemmDefault,
              "cuBLAS ABI values changed");
#endif

struct Cublas {
  using Create = int (*)(void **handle);
  using Destroy = int (*)(void *handle);
  using SetStream = int (*)(void *handle, CUstream stream);
  using GetVersion = int (*)(void *handle, int *version);
  using GemmEx = int (*)(void *handle, int transa, int transb, int m, int n, int k,
                         const void *alpha, const void *a, int aType, int lda, const void *b,
                         int bType, int ldb, const void *beta, void *c, int cType, int ldc,
                         int computeType, int algo);
  using StatusString = const char *(*)(int status);

  Create create = nullptr;
  Destroy destroy = nullptr;
  SetStream setStream = nullptr;
  GetVersion getVersion = nullptr;
  GemmEx gemmEx = nullptr;
  StatusString statusString = nullptr; // optional
  std::string library;                 // the file dlopen found

  llvm::Error check(int status, llvm::StringRef call) const {
    if (status == 0)
      return llvm::Error::success();
    const char *text = statusString ? statusString(status) : nullptr;
    return fail(llvm::formatv("{0}: cuBLAS status {1}{2}{3}", call, status, text ? " " : "",
                              text ? text : ""));
  }
};

// FLASHBOB_CUBLAS (a path or name), then libcublas.so.13, .so.12, .so. Kept loaded for the
// process (cuBLAS tears its runtime down at exit).
llvm::Expected<Cublas> loadCublas() {
  std::vector<std::string> candidates;
  if (std::string forced = support::knobs::cublas(); !forced.empty()) {
    // Refused outright, not passed over for the defaults: the user named this one.
    if (llvm::Error e = support::checkLibraryFile(forced, support::Knob::Cublas))
      return fail("cuBLAS not loaded: " + llvm::toString(std::move(e)));
    candidates.push_back(forced);
  }
  for (const char *name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
    candidates.push_back(name);
  std::string why;
  for (const std::string &name : candidates) {
    void *handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *err = ::dlerror();
      why += (why.empty() ? "" : "; ") + std::string(err ? err : name + ": dlopen failed");
      continue;
    }
    Cublas c;
    c.create = reinterpret_cast<Cublas::Create>(::dlsym(handle, "cublasCreate_v2"));
    c.destroy = reinterpret_cast<Cublas::Destroy>(::dlsym(handle, "cublasDestroy_v2"));
    c.setStream = reinterpret_cast<Cublas::SetStream>(::dlsym(handle, "cublasSetStream_v2"));
    c.getVersion = reinterpret_cast<Cublas::GetVersion>(::dlsym(handle, "cublasGetVersion_v2"));
    c.gemmEx = reinterpret_cast<Cublas::GemmEx>(::dlsym(handle, "cublasGemmEx"));
    c.statusString = reinterpret_cast<Cublas::StatusString>(::dlsym(handle, "cublasGetStatusString"));
    if (!c.create || !c.destroy || !c.setStream || !c.getVersion || !c.gemmEx) {
      why += (why.empty() ? "" : "; ") + name + ": missing cublasCreate_v2/cublasGemmEx";
      continue;
    }
    Dl_info info;
    c.library = ::dladdr(reinterpret_cast<void *>(c.gemmEx), &info) && info.dli_fname
                    ? info.dli_fname
                    : name;
    return c;
  }
  return fail("cuBLAS not loaded: " + why);
}

// Random bf16 bit patterns with magnitudes in [2^-6, 4): never zeros (zeros run a
// matrix product faster than real data).
std::vector<uint16_t> randomBf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> out(n);
  // 16 ranges, each its own stream: the same bits whatever the machine's core count.
  constexpr size_t kRanges = 16;
  llvm::parallelFor(0, kRanges, [&](size_t w) {
    size_t begin = n * w / kRanges, end = n * (w + 1) / kRanges;
    uint64_t x = seed + 0x9E3779B97F4A7C15ull * (w + 1);
    for (size_t i = begin; i < end; ++i) {
      x += 0x9E3779B97F4A7C15ull;
      uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      uint16_t sign = static_cast<uint16_t>((z >> 63) << 15);
      uint16_t exponent = static_cast<uint16_t>((121 + ((z >> 7) & 7)) << 7);
      out[i] = sign | exponent | static_cast<uint16_t>(z & 0x7F);
    }
  });
  return out;
}
} // namespace

llvm::Expected<Ceiling> measureCeiling(CudaDriver &driver) {
  auto cublas = loadCublas();
  if (!cublas)
    return cublas.takeError();
  const size_t elems = static_cast<size_t>(kGemmSize) * kGemmSize, bytes = elems * 2;
  DeviceBuffer a(driver), b(driver), c(driver);
  if (llvm::Error e = a.allocate(bytes))
    return std::move(e);
  if (llvm::Error e = b.allocate(bytes))
    return std::move(e);
  if (llvm::Error e = c.allocate(bytes))
    return std::move(e);
  {
    std::vector<uint16_t> host = randomBf16(elems, 1);
    FLASHBOB_CU(driver, cuMemcpyHtoD(a.get(), host.data(), bytes));
    host = randomBf16(elems, 2);
    FLASHBOB_CU(driver, cuMemcpyHtoD(b.get(), host.data(), bytes));
  }
  void *handle = nullptr;
  if (llvm::Error e = cublas->check(cublas->create(&handle), "cublasCreate"))
    return std::move(e);
  llvm::scope_exit destroy([&] { cublas->destroy(handle); });
  if (llvm::Error e = cublas->check(cublas->setStream(handle, nullptr), "cublasSetStream"))
    return std::move(e);
  Ceiling result;
  result.source = "cublas";
  result.library = cublas->library;
  cublas->getVersion(handle, &result.cublasVersion);
  const float alpha = 1.0f, beta = 0.0f;
  const int n = static_cast<int>(kGemmSize);
  auto timer = runtime::EventTimer::create(driver);
  if (!timer)
    return timer.takeError();
  auto gemm = [&]() -> llvm::Error {
    return cublas->check(cublas->gemmEx(handle, kCublasOpN, kCublasOpN, n, n, n, &alpha,
                                        reinterpret_cast<void *>(a.get()), kCudaR16BF, n,
                                        reinterpret_cast<void *>(b.get()), kCudaR16BF, n, &beta,
                                        reinterpret_cast<void *>(c.get()), kCudaR16BF, n,
                                        kCublasCompute32F, kCublasGemmDefault),
                         "cublasGemmEx");
  };
  auto ms = bestTime(*timer, 2, 5, gemm);
  if (!ms)
    return ms.takeError();
  FLASHBOB_CU(driver, cuCtxSynchronize());
  result.bestMs = *ms;
  result.tflops = 2.0 * kGemmSize * kGemmSize * kGemmSize / (*ms * 1e-3) / 1e12;
  return result;
}

llvm::Expected<Copy> measureCopy(CudaDriver &driver) {
  size_t freeBytes = 0, total = 0;
  FLASHBOB_CU(driver, cuMemGetInfo(&freeBytes, &total));
  size_t bytes = std::min<size_t>(size_t(1) << 30, freeBytes / 4) & ~size_t(0xFFFFF);
  if (bytes == 0)
    return fail("too little free device memory for a copy");
  DeviceBuffer src(driver), dst(driver);
  if (llvm::Error e = src.allocate(bytes))
    return std::move(e);
  if (llvm::Error e = dst.allocate(bytes))
    return std::move(e);
  FLASHBOB_CU(driver, cuMemsetD32(src.get(), 0x3F803F80u, bytes / 4));
  auto timer = runtime::EventTimer::create(driver);
  if (!timer)
    return timer.takeError();
  auto ms = bestTime(*timer, 1, 5, [&]() -> llvm::Error {
    FLASHBOB_CU(driver, cuMemcpyDtoD(dst.get(), src.get(), bytes));
    return llvm::Error::success();
  });
  if (!ms)
    return ms.takeError();
  Copy c;
  c.bytes = bytes;
  c.bestMs = *ms;
  c.tbs = 2.0 * bytes / (*ms * 1e-3) / 1e12;
  return c;
}

llvm::Expected<DeviceInfo> deviceInfo(CudaDriver &driver) {
  DeviceInfo info;
  CUdevice dev;
  FLASHBOB_CU(driver, cuCtxGetDevice(&dev));
  char name[256] = {};
  FLASHBOB_CU(driver, cuDeviceGetName(name, sizeof(name), dev));
  info.name = name;
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.l2Bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  return info;
}

} // namespace flashbob::tool
