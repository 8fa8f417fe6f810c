// The bob lowering passes, in pipeline order. Each has a lit test named after its flag in
// test/lit/passes/.
#ifndef BOB_PASSES_TD
#define BOB_PASSES_TD

include "mlir/Pass/PassBase.td"

def BobAllocateShared : Pass<"bob-allocate-shared", "::flashbob::bob::KernelOp"> {
  let summary = "Place every bob.alloc_shared in the kernel's dynamic shared memory";
  let description = [{
    Assigns each shared tile a byte offset (128-byte aligned, rows padded by 16 bytes so that
    ldmatrix and cp.async are free of bank conflicts) and records the total in the kernel's
    `bob.shared_bytes`. Fails with the byte count when it exceeds `max-bytes`.
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"232448",
           "Shared memory a block may use (H100/H200: 227 KiB)">
  ];
}

def BobLowerKernel : Pass<"bob-lower-kernel", "::mlir::ModuleOp"> {
  let summary = "Turn each bob.kernel into a gpu.func kernel inside a gpu.module";
  let description = [{
    The body moves unchanged; the spec and the shared memory size become attributes of the
    gpu.func, and the block size (32 * warps threads) is recorded as known_block_size.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def BobLowerTiles : Pass<"bob-lower-tiles", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Lower tile ops to per-thread vectors, nvvm mma.sync/ldmatrix and nvgpu cp.async";
  let description = [{
    Register tiles become per-thread vectors in the m16n8k16 fragment layout; products become
    nvvm.ldmatrix + nvvm.mma.sync; global->shared copies become nvgpu.device_async_copy with
    zero fill past the sequence end; reductions use quad shuffles. Barriers are inserted here.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::vector::VectorDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::NVVM::NVVMDialect", "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect", "::mlir::LLVM::LLVMDialect"];
}

#endif // BOB_PASSES_TD
