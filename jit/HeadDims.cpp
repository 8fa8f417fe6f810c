#include "jit/HeadDims.h"

#include "compiler/dialect/Target.h"
#include "jit/KernelCache.h"
#include "kernels/Signature.h"
#include "runtime/launch/RowCopy.h"
#include "support/Errors.h"
#include "support/Knobs.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <bitset>

namespace flashbob::jit {

using kernels::Operand;

HeadDimPadding headDimPadding(const AttentionProblem &p) {
  if (p.valueDim() != p.headDim)
    return HeadDimPadding::copy;
  if (bob::isKernelHeadDim(p.headDim))
    return HeadDimPadding::none;
  // Read once (support/Knobs.h): this is on every launch's path.
  static const bool inKernel = support::knobs::padInKernel();
  if (inKernel && bob::isKernelTensorDim(p.headDim, bob::kernelHeadDim(p.headDim)))
    return HeadDimPadding::inKernel;
  return HeadDimPadding::copy;
}

AttentionProblem paddedProblem(const AttentionProblem &p) {
  AttentionProblem padded = p;
  padded.scale = p.effectiveScale(); // before the head dim changes: 1/sqrt(d) by default
  padded.headDim = bob::kernelHeadDim(std::max(p.headDim, p.valueDim()));
  padded.headDimV = 0;
  return padded;
}

namespace {

// One tensor operand of the call and its zero-padded stand-in.
struct PaddedTensor {
  Operand operand;
  bool output = false;
  int64_t extents[3] = {0, 0, 0}; // (batch, heads, rows) as the kernels index them
  int64_t width = 0;              // the caller's head dim of it (d, or d_v for v's kin)
  int64_t elementBytes = 2;
  Tensor caller;  // the caller's memory
  Tensor padded;  // its stand-in: strides in elements; data an offset until allocated
  int sameAs = -1; // an earlier input bound to the same memory, whose copy this one reads
};

// Rows in element strides as the kernels address them (pack(): a packed batch's batch stride).
runtime::RowArray rowsOf(const AttentionProblem &p, const PaddedTensor &t, const Tensor &memory) {
  runtime::RowArray a;
  a.base = memory.data;
  const int64_t strides[3] = {batchStride(p, memory, t.extents[1], t.extents[2]),
                              memory.stride[1], memory.stride[2]};
  for (int i = 0; i < 3; ++i)
    a.strideBytes[i] = strides[i] * t.elementBytes;
  return a;
}

// Packed strides, width kernelHeadDim(d), with the dimensions in the order of the caller's
// strides (largest first): the rows a copy moves then follow one another evenly on both sides
// wherever the caller's do, so the usual layouts ((batch, heads, seq, d), (batch, seq, heads,
// d), a packed batch's (total, heads, d)) copy in one driver call each.
void layOut(const AttentionProblem &p, PaddedTensor &t, int64_t width) {
  const int64_t callerStrides[3] = {batchStride(p, t.caller, t.extents[1], t.extents[2]),
                                    t.caller.stride[1], t.caller.stride[2]};
  int order[3] = {0, 1, 2};
  std::stable_sort(order, order + 3,
                   [&](int a, int b) { return callerStrides[a] > callerStrides[b]; });
  int64_t step = width;
  for (int i = 2; i >= 0; --i) {
    t.padded.stride[order[i]] = step;
    step *= t.extents[order[i]];
  }
  t.padded.stride[3] = 1;
}

int64_t paddedBytes(const PaddedTensor &t, int64_t width) {
  return t.extents[0] * t.extents[1] * t.extents[2] * width * t.elementBytes;
}

bool sameMemory(const PaddedTensor &a, const PaddedTensor &b) {
  return a.caller.data == b.caller.data && std::equal(a.caller.stride, a.caller.stride + 4,
                                                      b.caller.stride) &&
         std::equal(a.extents, a.extents + 3, b.extents) && a.width == b.width &&
         a.elementBytes == b.elementBytes;
}

} // namespace

llvm::Error runOnPaddedCopies(
    const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds, const Bindings &bindings,
    CUstream stream,
    llvm::function_ref<llvm::Error(const AttentionProblem &, const Bindings &)> launch) {
  const AttentionProblem padded = paddedProblem(p);
  const int64_t width = padded.headDim;

  // The tensor operands, in signature order; an output of any kernel of the call is an output
  // (copied back), every other one an input (copied in).
  std::bitset<kernels::kOperandCount> written, seen;
  for (bob::KernelKind kind : kinds)
    for (const kernels::Param &param : kernels::signature(kind, p.varlen, p.ringStep))
      if (!param.isScalar && param.output)
        written.set(static_cast<size_t>(param.operand));
  llvm::SmallVector<PaddedTensor, kernels::kOperandCount> tensors;
  for (bob::KernelKind kind : kinds)
    for (const kernels::Param &param : kernels::signature(kind, p.varlen, p.ringStep)) {
      if (param.isScalar || seen[static_cast<size_t>(param.operand)])
        continue;
      seen.set(static_cast<size_t>(param.operand));
      const kernels::OperandInfo &info = kernels::operandInfo(param.operand);
      if (info.layout != kernels::Layout::tensor)
        continue;
      const bool query = info.side == kernels::Side::query;
      PaddedTensor t;
      t.operand = param.operand;
      t.output = written[static_cast<size_t>(param.operand)];
      t.extents[0] = p.tensorBatch();
      t.extents[1] = query ? p.heads : p.keyValueHeads();
      t.extents[2] = query ? p.seqQ : p.seqK;
      t.width = p.width(info.width);
      t.elementBytes = kernels::isFloat32Tensor(param, p.ringStep) ? 4 : 2;
      t.caller = bindings[param.operand];
      layOut(p, t, width);
      tensors.push_back(t);
    }
  // Inputs first, back to back, by their caller's width: every input row is `width` elements of
  // 2 bytes apart from the next, so one 2D memset per width zeroes the padding columns of all
  // the inputs of that width. Then the outputs.
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const PaddedTensor &a, const PaddedTensor &b) {
                     return std::make_pair(a.output, a.width) < std::make_pair(b.output, b.width);
                   });
  struct ZeroRun {
    uint64_t offset = 0, rows = 0;
    int64_t width = 0; // the callers' columns, whose padding past them is zeroed
  };
  llvm::SmallVector<ZeroRun, 2> zeroRuns;
  uint64_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    PaddedTensor &t = tensors[i];
    if (!t.output)
      for (size_t j = 0; j < i && t.sameAs < 0; ++j)
        if (sameMemory(tensors[j], t))
          t.sameAs = int(j);
    if (t.sameAs >= 0) {
      t.padded = tensors[size_t(t.sameAs)].padded;
      continue;
    }
    if (t.output) {
      bytes = (bytes + 255) / 256 * 256;
    } else if (t.width < width) {
      if (zeroRuns.empty() || zeroRuns.back().width != t.width)
        zeroRuns.push_back({bytes, 0, t.width});
      zeroRuns.back().rows += uint64_t(t.extents[0] * t.extents[1] * t.extents[2]);
    }
    t.padded.data = CUdeviceptr(bytes);
    bytes += uint64_t(paddedBytes(t, width));
  }

  auto cache = KernelCache::get(); // the current context (the primary one if none)
  if (!cache)
    return cache.takeError();
  runtime::CudaDriver &driver = (*cache)->driver();
  CUdevice device = 0;
  FLASHBOB_CU(driver, cuCtxGetDevice(&device));
  int pools = 0, maxPitch = 0;
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                           device));
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&maxPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH, device));
  CUdeviceptr base = 0;
  if (pools) {
    FLASHBOB_CU(driver, cuMemAllocAsync(&base, bytes, stream));
  } else {
    // Without stream-ordered allocation the memory is freed only after the stream's work,
    // which a captured stream cannot wait for.
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    FLASHBOB_CU(driver, cuStreamIsCapturing(stream, &capture));
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
      return support::makeInvalidArgument(
          "head_dim", "flashbob: head_dim " + llvm::Twine(p.headDim) +
                          (p.valueDim() != p.headDim
                               ? " (head_dim_v " + std::to_string(p.valueDim()) + ")"
                               : std::string()) +
                          " is copied into zero-padded memory, which this device (without "
                          "memory pools) cannot allocate while the stream is captured into a "
                          "CUDA graph");
    FLASHBOB_CU(driver, cuMemAlloc(&base, bytes));
  }

  auto work = [&]() -> llvm::Error {
    for (PaddedTensor &t : tensors)
      t.padded.data += base;
    for (const ZeroRun &run : zeroRuns)
      FLASHBOB_CU(driver, cuMemsetD2D8Async(base + CUdeviceptr(run.offset + run.width * 2),
                                            size_t(width * 2), 0, size_t((width - run.width) * 2),
                                            size_t(run.rows), stream));
    Bindings stand = bindings;
    for (const PaddedTensor &t : tensors) {
      stand.bind(t.operand, t.padded);
      if (t.output || t.sameAs >= 0)
        continue;
      if (llvm::Error e = runtime::copyRows(driver, t.extents, rowsOf(p, t, t.caller),
                                            rowsOf(padded, t, t.padded), t.width * t.elementBytes,
                                            maxPitch, stream))
        return e;
    }
    if (llvm::Error e = launch(padded, stand))
      return e;
    for (const PaddedTensor &t : tensors)
      if (t.output)
        if (llvm::Error e = runtime::copyRows(driver, t.extents, rowsOf(padded, t, t.padded),
                                              rowsOf(p, t, t.caller), t.width * t.elementBytes,
                                              maxPitch, stream))
          return e;
    return llvm::Error::success();
  };
  llvm::Error result = work();
  // Freed whether the work was queued or not (stream-ordered: after what was queued).
  auto release = [&]() -> llvm::Error {
    if (pools) {
      FLASHBOB_CU(driver, cuMemFreeAsync(base, stream));
      return llvm::Error::success();
    }
    FLASHBOB_CU(driver, cuStreamSynchronize(stream));
    FLASHBOB_CU(driver, cuMemFree(base));
    return llvm::Error::success();
  };
  llvm::Error freed = release();
  if (result) {
    llvm::consumeError(std::move(freed));
    return result;
  }
  return freed;
}

} // namespace flashbob::jit
