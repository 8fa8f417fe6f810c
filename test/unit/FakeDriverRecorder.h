// What a CPU test through the fake CUDA driver (test/fake_driver) needs of it: pointing the
// runtime at it, and reading back what the calls launched. The test target defines
// FAKE_CUDA_LIBRARY and FAKE_DRIVER_CACHE_DIR (flashbob_fake_driver_test, test/CMakeLists.txt).
#pragma once

#include "support/Knobs.h"
#include "test/fake_driver/FakeCudaDriver.h"

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <vector>

namespace flashbob::fake_driver {

// Points the runtime at the fake driver and the test's cache directory; before the first driver
// access of the process (knobs are read once).
inline void useFakeDriver() {
  support::setOverride(support::Knob::CudaDriver, FAKE_CUDA_LIBRARY);
  support::setOverride(support::Knob::CacheDir, FAKE_DRIVER_CACHE_DIR);
}

// The fake's recorder, from the copy the runtime loaded (nullptr while it is not loaded).
inline void *loadedFake() { return ::dlopen(FAKE_CUDA_LIBRARY, RTLD_NOW | RTLD_NOLOAD); }

// The launches since the last reset, which stays (the scratch memory of the calls too).
inline std::vector<fake_cuda_launch_record> recordedLaunches() {
  void *fake = loadedFake();
  REQUIRE(fake);
  auto count = reinterpret_cast<fake_cuda_launch_count_fn>(::dlsym(fake, "fake_cuda_launch_count"));
  auto get = reinterpret_cast<fake_cuda_launch_fn>(::dlsym(fake, "fake_cuda_launch"));
  std::vector<fake_cuda_launch_record> out(static_cast<size_t>(count()));
  for (size_t i = 0; i < out.size(); ++i)
    get(int(i), &out[i]);
  return out;
}

// Forgets the launches and call counts, and frees the memory calls freed on their streams.
inline void resetFake() {
  void *fake = loadedFake();
  REQUIRE(fake);
  reinterpret_cast<fake_cuda_reset_fn>(::dlsym(fake, "fake_cuda_reset"))();
}

// The launches since the last reset; resets.
inline std::vector<fake_cuda_launch_record> launches() {
  std::vector<fake_cuda_launch_record> out = recordedLaunches();
  resetFake();
  return out;
}

// How often the driver's entry point `entry` was called since the last reset.
inline int callCount(const char *entry) {
  void *fake = loadedFake();
  REQUIRE(fake);
  return reinterpret_cast<fake_cuda_call_count_fn>(::dlsym(fake, "fake_cuda_call_count"))(entry);
}

} // namespace flashbob::fake_driver
