#include "runtime/driver/CudaDriver.h"

#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/LibraryFile.h"

#include "llvm/Support/FormatVariadic.h"

#include <dlfcn.h>
#include <mutex>

namespace flashbob::runtime {

namespace {
llvm::Error noDriver(const llvm::Twine &why) { return support::makeNoDriver(why); }
} // namespace

llvm::Error CudaDriver::load() {
  // FLASHBOB_CUDA_DRIVER names another driver library (tests use it to simulate "no driver").
  const std::string library = support::knobs::cudaDriver();
  if (llvm::Error e = support::checkLibraryFile(library, support::Knob::CudaDriver))
    return noDriver(llvm::toString(std::move(e)));
  handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char *why = ::dlerror();
    return noDriver(why ? why : library + ": dlopen failed");
  }

  // The one symbol taken by name; every other one comes through it.
  using GetProcAddress = CUresult (*)(const char *, void **, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult *);
  auto getProcAddress = reinterpret_cast<GetProcAddress>(::dlsym(handle_, "cuGetProcAddress_v2"));
  if (!getProcAddress)
    return noDriver(library + " has no cuGetProcAddress_v2 (driver older than CUDA 12)");

#define FLASHBOB_RESOLVE_ENTRY(name, abi)                                                         \
  {                                                                                               \
    void *fn = nullptr;                                                                           \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                  \
    CUresult r = getProcAddress(#name, &fn, abi, CU_GET_PROC_ADDRESS_DEFAULT, &found);            \
    if (r != CUDA_SUCCESS || !fn || found != CU_GET_PROC_ADDRESS_SUCCESS)                         \
      return noDriver(llvm::formatv("cuGetProcAddress({0}, {1}) failed (CUresult {2}, status {3})", \
                                    #name, abi, int(r), int(found)));                             \
    api_.name = reinterpret_cast<decltype(api_.name)>(fn);                                        \
  }
  FLASHBOB_CUDA_DRIVER_ENTRY_POINTS(FLASHBOB_RESOLVE_ENTRY)
#undef FLASHBOB_RESOLVE_ENTRY

  if (CUresult r = api_.cuInit(0); r != CUDA_SUCCESS)
    return noDriver("cuInit: " + describe(r));
  if (CUresult r = api_.cuDriverGetVersion(&version_); r != CUDA_SUCCESS)
    return noDriver("cuDriverGetVersion: " + describe(r));
  int devices = 0;
  if (CUresult r = api_.cuDeviceGetCount(&devices); r != CUDA_SUCCESS)
    return noDriver("cuDeviceGetCount: " + describe(r));
  if (devices == 0)
    return noDriver("the driver reports no CUDA device");
  return llvm::Error::success();
}

llvm::Expected<CudaDriver &> CudaDriver::get() {
  // Loaded once; a failure is remembered (load() fails only with NoDriverError, kept as its
  // reason) so every caller gets the same one line, of the same kind.
  static CudaDriver driver;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    if (llvm::Error e = driver.load())
      llvm::handleAllErrors(std::move(e), [](const support::NoDriverError &n) {
        failure = n.reason();
      }, [](const llvm::ErrorInfoBase &other) { failure = other.message(); });
  });
  if (!failure.empty())
    return support::makeNoDriver(failure);
  return driver;
}

std::string CudaDriver::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (api_.cuGetErrorName)
    api_.cuGetErrorName(result, &name);
  if (api_.cuGetErrorString)
    api_.cuGetErrorString(result, &text);
  return llvm::formatv("{0} ({1})", name ? name : "CUresult " + std::to_string(int(result)),
                       text ? text : "no description");
}

llvm::Error CudaDriver::check(CUresult result, llvm::StringRef call) const {
  if (result == CUDA_SUCCESS)
    return llvm::Error::success();
  // Keep only the function name of an expression like "cuMemAlloc(&p, n)".
  llvm::StringRef name = call.take_until([](char c) { return c == '(' || c == ' '; });
  return support::makeCudaCallError(name, int(result), describe(result));
}

} // namespace flashbob::runtime
