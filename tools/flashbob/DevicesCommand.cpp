// `flashbob devices`: what the CUDA driver sees. Also the smallest check that a GPU is usable.
#include "runtime/driver/CudaDriver.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {

llvm::cl::SubCommand devicesCommand("devices", "List the CUDA devices the driver sees");

static llvm::Error listDevices(runtime::CudaDriver &driver) {
  int count = 0;
  FLASHBOB_CU(driver, cuDeviceGetCount(&count));
  llvm::outs() << llvm::formatv("CUDA driver {0}.{1}, {2} device(s)\n", driver.version() / 1000,
                                (driver.version() % 1000) / 10, count);
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    FLASHBOB_CU(driver, cuDeviceGet(&dev, i));
    char name[256] = {};
    FLASHBOB_CU(driver, cuDeviceGetName(name, sizeof(name), dev));
    int major = 0, minor = 0, sms = 0, smemOptin = 0;
    FLASHBOB_CU(driver, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    FLASHBOB_CU(driver, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    FLASHBOB_CU(driver, cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    FLASHBOB_CU(driver, cuDeviceGetAttribute(&smemOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    size_t bytes = 0;
    FLASHBOB_CU(driver, cuDeviceTotalMem(&bytes, dev));
    llvm::outs() << llvm::formatv("  [{0}] {1}: sm_{2}{3}, {4} SMs, {5:F1} GiB, {6} KiB shared/block\n",
                                  i, name, major, minor, sms, double(bytes) / (1ull << 30),
                                  smemOptin / 1024);
  }
  return llvm::Error::success();
}

int runDevices() {
  auto driver = runtime::CudaDriver::get();
  if (!driver) {
    llvm::errs() << "flashbob: " << llvm::toString(driver.takeError()) << "\n";
    return kExitNoDriver;
  }
  if (llvm::Error e = listDevices(*driver)) {
    llvm::errs() << "flashbob: " << llvm::toString(std::move(e)) << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

} // namespace flashbob::tool
