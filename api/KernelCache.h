// Compiled and loaded kernels of this process, by spec (in memory; a hit is one hash lookup).
// The on-disk cache of every stage is the runtime issue's; this is the layer that will use it.
#pragma once

#include "compiler/KernelSpec.h"
#include "compiler/pipeline/Pipeline.h"
#include "runtime/launch/Kernel.h"

#include "llvm/ADT/StringMap.h"

#include <memory>
#include <mutex>

namespace flashbob::api {

// The tensor maps a compiled kernel takes, as the launcher builds them.
std::vector<runtime::TensorMapSpec> tensorMapsOf(const compiler::KernelArtifacts &artifacts);

struct CachedKernel {
  compiler::KernelSpec spec;
  std::unique_ptr<runtime::LoadedKernel> loaded;
};

class KernelCache {
public:
  // The cache of the calling thread's current context (modules belong to a context): one per
  // context, created on first use. Without a current context, device 0's primary context is
  // made current (what CUDA runtimes and frameworks use). Fails with the driver's
  // "no CUDA driver found: ..." when there is no GPU. A context destroyed by its owner leaves
  // its cache behind: create contexts for the process's lifetime.
  static llvm::Expected<KernelCache *> get();

  llvm::Expected<const CachedKernel *> kernel(const compiler::KernelSpec &spec);
  runtime::CudaDriver &driver() { return driver_; }
  const std::string &arch() const { return arch_; }
  // `spec` with tiles this GPU's shared memory per block holds: unchanged where the tile table
  // was made for it (kernels::tableSharedBudget), else shrunk once per spec and remembered
  // (kernels::fitSharedMemory builds IR: milliseconds, not for every launch).
  llvm::Expected<compiler::KernelSpec> fitted(compiler::KernelSpec spec);

private:
  KernelCache(runtime::CudaDriver &driver, std::string arch, CUcontext context,
              int64_t sharedLimit)
      : driver_(driver), arch_(std::move(arch)), context_(context), sharedLimit_(sharedLimit) {}
  runtime::CudaDriver &driver_;
  std::string arch_;
  CUcontext context_;
  int64_t sharedLimit_; // opt-in shared memory per block of the context's device
  std::mutex mutex_;
  llvm::StringMap<std::unique_ptr<CachedKernel>> kernels_;
  llvm::StringMap<compiler::KernelSpec> fittedSpecs_;
};

} // namespace flashbob::api
