// main() of every GPU test executable: without a CUDA driver the whole executable is skipped
// (exit 77, CTest SKIP_RETURN_CODE) with one visible line, instead of passing silently.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "runtime/driver/CudaDriver.h"

#include <cstdio>

int main(int argc, char **argv) {
  auto driver = flashbob::runtime::CudaDriver::get();
  if (!driver) {
    std::printf("SKIPPED: %s\n", llvm::toString(driver.takeError()).c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
