// Compiled and loaded kernels of this process, by spec: compile-or-load through the disk cache
// (runtime/cache/DiskCache), one in-memory cache per CUDA context (a hit is one hash lookup).
#pragma once

#include "compiler/KernelSpec.h"
#include "compiler/pipeline/Pipeline.h"
#include "jit/Compile.h"
#include "jit/KernelKey.h"
#include "runtime/launch/Kernel.h"

#include "llvm/ADT/StringMap.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <unordered_map>

namespace flashbob::jit {

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
  // Compiles (or reads from the disk cache) every spec of `specs` not in this cache yet, one
  // thread each, then loads them in order: the kernels of one operation or of one HVP step
  // cost the slowest compilation instead of the sum (each compile has its own MLIR context and
  // ptxas process). Compilations report "(step/total)" by their place in `specs`. The first
  // error in `specs` order is returned, after every thread has finished.
  llvm::Error prepare(llvm::ArrayRef<compiler::KernelSpec> specs);
  runtime::CudaDriver &driver() { return driver_; }
  bob::Arch arch() const { return arch_; }
  // Opt-in shared memory per block of the context's device.
  int64_t sharedLimit() const { return sharedLimit_; }
  // `spec` with tiles this GPU's shared memory per block holds: unchanged where the tile table
  // was made for it (kernels::tableSharedBudget), else shrunk once per spec and remembered
  // (jit::fitSharedMemory builds IR: milliseconds, not for every launch).
  llvm::Expected<compiler::KernelSpec> fitted(compiler::KernelSpec spec);

private:
  // What loading a kernel needs, owned (runtime::KernelImage only refers to it).
  struct Built {
    std::string cubin;
    compiler::LaunchFacts facts; // derived from the spec (compileFront), never read from disk
    bool fromDisk = false;       // a disk-cache hit: its cubin is checked when loaded
  };
  // A kernel from the disk cache, or compiled (and stored there): no lock held, so several
  // may run at once; `step` of `total` for the progress message.
  llvm::Expected<Built> obtain(const compiler::KernelSpec &spec, size_t step, size_t total);
  // The back stage of `front`, stored in the disk cache under `keyText`.
  llvm::Expected<Built> compile(FrontStage front, const compiler::KernelSpec &spec,
                                const std::string &keyText, size_t step, size_t total);
  // Loads `built` for `spec` unless another thread did first. A cubin from the disk cache that
  // is not the spec's kernel (its entry missing, or parameters other than a launch packs) is
  // discarded there and the kernel recompiled and loaded instead, in this call.
  llvm::Expected<const CachedKernel *> install(const compiler::KernelSpec &spec, Built built,
                                               size_t step, size_t total);
  const CachedKernel *find(const compiler::KernelSpec &spec);

  KernelCache(runtime::CudaDriver &driver, bob::Arch arch, CUcontext context, int64_t sharedLimit)
      : driver_(driver), arch_(arch), context_(context), sharedLimit_(sharedLimit) {}
  runtime::CudaDriver &driver_;
  bob::Arch arch_;
  CUcontext context_;
  int64_t sharedLimit_;
  std::mutex mutex_;
  std::unordered_map<compiler::KernelSpec, std::unique_ptr<CachedKernel>, SpecHash, SpecEqual>
      kernels_;
  std::unordered_map<compiler::KernelSpec, compiler::KernelSpec, SpecHash, SpecEqual> fitted_;
};

} // namespace flashbob::jit
