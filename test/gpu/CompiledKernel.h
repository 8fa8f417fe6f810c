// For the GPU tests that launch one kernel spec directly (not through the API): compile it
// (jit::compileKernel, assembled) and load it on the test's context.
#pragma once

#include "test/gpu/GpuTestUtil.h"

#include "jit/Compile.h"

#include <memory>

namespace flashbob::test {

inline std::unique_ptr<runtime::LoadedKernel> compileAndLoad(const compiler::KernelSpec &spec) {
  auto artifacts = jit::compileKernel(spec, /*assemble=*/true);
  if (!artifacts)
    FAIL(llvm::toString(artifacts.takeError()));
  runtime::KernelImage image{artifacts->cubin, artifacts->entry,
                             static_cast<unsigned>(artifacts->threads),
                             static_cast<unsigned>(artifacts->sharedBytes),
                             artifacts->tensorMaps};
  auto kernel = runtime::LoadedKernel::load(driver(), image);
  if (!kernel)
    FAIL(llvm::toString(kernel.takeError()));
  return std::move(*kernel);
}

} // namespace flashbob::test
