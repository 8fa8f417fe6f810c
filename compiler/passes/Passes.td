// The bob lowering passes, in pipeline order. Each has a lit test named after its flag in
// test/lit/passes/.
#ifndef BOB_PASSES_TD
#define BOB_PASSES_TD

include "mlir/Pass/PassBase.td"

def BobDifferentiateScoreMod : Pass<"bob-differentiate-score-mod"> {
  let summary = "Write the partial derivatives of each bob.score_mod as tagged regions";
  let description = [{
    Differentiates the body of every bob.score_mod nested in the operation in forward mode:
    by the score, once and twice (F1 = f'(T) and F2 = f''(T), always written, constants where
    f is T plus terms independent of T), and by each f32 capture, alone, after the score and
    after each capture (df/dtheta, d(F1)/dtheta, d2f/dtheta dtheta', written only where they
    are not identically zero). A partial by a memref capture yields one group per load of it
    that contributes: the coefficient and the load's indices. The derivative regions use the
    body's ops only (the set is closed under the rules), with structural zeros dropped, ones
    multiplied away, constants folded, and dead and repeated ops removed; the body is kept as
    written. An op that already has partials is left as it is. Not in the pipeline yet: no
    kernel applies a modification (docs/architecture.md).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

def BobPipelineLoads : Pass<"bob-pipeline-loads", "::flashbob::bob::KernelOp"> {
  let summary = "With stages = 2, load the next iteration's shared tiles while this one computes";
  let description = [{
    Double-buffers the tiles that an scf.for loads at the top level of its body (rows computed
    from the induction variable): a second buffer per tile, the first iteration's copies started
    before the loop, and in the body a bob.wait_shared followed by the next iteration's copies
    (async bob.load_shared) into the other buffers. Kernels with stages = 1 are unchanged.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def BobChunkSweeps : Pass<"bob-chunk-sweeps", "::flashbob::bob::KernelOp"> {
  let summary = "Run a loop whose accumulators flush `every N` steps as chunks of N steps";
  let description = [{
    An scf.for whose body yields `bob.flush ... every N` results becomes a loop over chunks of
    N steps holding the original loop over the chunk's steps (the same induction values, in the
    same order, so everything its body computes from them, bob-pipeline-loads' buffer parity
    and next-step loads included, is unchanged), followed by plain flushes of those values. The
    steps then run without testing whether a flush is due. After bob-pipeline-loads, which
    double-buffers one flat loop. Other loops: no change.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def BobStageOperands : Pass<"bob-stage-operands", "::flashbob::bob::KernelOp"> {
  let summary = "On sm_90a (or with column groups), move register A operands to shared memory";
  let description = [{
    A bob.mma whose A operand is a bob.convert of an f32 register tile, and which otherwise
    qualifies for wgmma (whole warpgroups of accumulator rows, swizzle-able shared operands),
    gets a bob.store_shared of the f32 tile into a scratch shared tile and reads A from it.
    With column groups (warp_cols > 1) every such product does, on every target. Each staged
    value has its own tile, stored once; the stores of the values that exist at a block's
    first staged product form one run just before it (bob-lower-tiles gives a run one barrier
    pair). Runs before bob-allocate-shared, which places the scratch tiles. Other targets
    without column groups: no change.
  }];
}

def BobUseTma : Pass<"bob-use-tma", "::flashbob::bob::KernelOp"> {
  let summary = "On sm_90a, fill shared tiles from global memory with TMA";
  let description = [{
    Each bob.load_shared from a kernel argument into a swizzled tile, bounded by a tensor's
    sequence length, gets `tma` and a tensor-map argument (an !llvm.ptr appended to the
    kernel's arguments, one per distinct tensor, bound and box), described for the launcher in
    the kernel's `bob.tensor_maps`. Other targets and other loads: no change (cp.async).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def BobAllocateShared : Pass<"bob-allocate-shared", "::flashbob::bob::KernelOp"> {
  let summary = "Place every bob.alloc_shared in the kernel's dynamic shared memory";
  let description = [{
    Assigns each shared tile a byte offset in its layout for the target (SharedLayout.h:
    padded rows, 128-byte aligned; or on sm_90a the wgmma swizzle, 1024-byte aligned) and records the total in the kernel's
    `bob.shared_bytes`. Fails with the byte count when the tiles and the static reserve exceed
    `max-bytes` (by default the target's limit).
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"0",
           "Shared memory a block may use; 0: the kernel's target's opt-in limit "
           "(compiler/dialect/Target.h)">
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
  let summary = "Lower tile ops to per-thread vectors, tensor-core products and async copies";
  let description = [{
    Register tiles become per-thread vectors in the m16n8k16 fragment layout; products become
    nvvm.wgmma.mma_async (sm_90a, whole warpgroups) or nvvm.ldmatrix + nvvm.mma.sync;
    global->shared copies become nvgpu.tma.async.load on mbarriers (loads with a tensor map,
    from bob-use-tma) or nvgpu.device_async_copy with zero fill past the sequence end;
    reductions use quad shuffles (and, with column groups, a static shared exchange between
    groups). Barriers and mbarriers are inserted here: one pair per run of adjacent
    bob.store_shared; wgmma products stay in flight until their first reader, which waits
    for them with wgmma.wait_group N (later products stay in flight), or until an op that
    writes memory, which waits for all.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::vector::VectorDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::NVVM::NVVMDialect", "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect", "::mlir::LLVM::LLVMDialect"];
}

def BobTensorMapParams : Pass<"bob-tensor-map-params", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Pass each tensor map by value: a 128-byte grid-constant kernel parameter";
  let description = [{
    Runs on the LLVM dialect, after the GPU functions became llvm.func kernels. The tensor-map
    arguments of a kernel with `bob.tensor_maps` (bob-use-tma appends them after every other
    argument, and each stays one !llvm.ptr through the conversion, so they are its last
    arguments) get `llvm.byval = !llvm.array<128 x i8>`, `llvm.align = 64` and
    `nvvm.grid_constant`: CUDA's `const __grid_constant__ CUtensorMap`. The launcher passes the
    encoded maps in the launch's parameters; nothing is copied to device memory. NVPTX declares
    each as `.param .align 64 .b8 name[128]` and the TMA copies address it through cvta.param.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

def BobJoinIndexWidths : Pass<"bob-join-index-widths", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Join the 32-bit index arithmetic to the 64-bit memory and control flow lowering";
  let description = [{
    The pipeline lowers arith and index ops with 32-bit `index` (the kernels' rows, columns,
    block and loop counters, shared-memory offsets: compiler/pipeline/Pipeline.cpp says why
    each fits), while the memref, GPU and control-flow conversions keep 64 bits, so global
    addresses are computed from 64-bit strides. Where the two meet, the conversions leave
    `unrealized_conversion_cast` pairs through `index`: i32 -> index -> i64 becomes `llvm.zext`
    (an index used as an address or carried by a branch: never negative where it addresses
    memory, and a zero extension followed by the truncation below gives back the same bits),
    i64 -> index -> i32 becomes `llvm.trunc` (thread and block ids, memref sizes: below 2^31 by
    jit/Validate.h, and 64-bit carriers of 32-bit values). Runs after the GPU-to-NVVM
    conversion, before reconcile-unrealized-casts.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // BOB_PASSES_TD
