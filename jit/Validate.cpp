// The checks that name a bad argument before anything runs (jit/Validate.h).
#include "jit/Validate.h"

#include "compiler/dialect/Target.h"
#include "jit/HeadDims.h"
#include "jit/Overlap.h"
#include "kernels/Kernels.h"
#include "runtime/driver/CudaDriver.h"
#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

namespace flashbob::jit {

using kernels::Operand;

namespace {
// `argument` is named first in `what`.
llvm::Error invalid(llvm::StringRef argument, const llvm::Twine &what) {
  return support::makeInvalidArgument(argument, "flashbob: " + what);
}

// A double as printf's %g writes it (1e+300, nan), for messages.
std::string plain(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

// The bytes from a tensor's address to the end of its last element, when its extents and strides
// (in `elementBytes` elements) address them without overflowing 64 bits or wrapping past the end
// of the address space; the kernels compute addresses from them in 64 bits.
std::optional<uint64_t> span(CUdeviceptr data, llvm::ArrayRef<int64_t> sizes,
                             llvm::ArrayRef<int64_t> strides, int64_t elementBytes) {
  int64_t last = 0; // the last element's offset, in elements
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t step = 0;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &step) ||
        __builtin_add_overflow(last, step, &last))
      return std::nullopt;
  }
  int64_t bytes = 0;
  if (__builtin_add_overflow(last, 1, &last) || __builtin_mul_overflow(last, elementBytes, &bytes))
    return std::nullopt;
  uint64_t end = 0;
  if (__builtin_add_overflow(uint64_t(data), uint64_t(bytes), &end))
    return std::nullopt;
  return uint64_t(bytes);
}

llvm::Error outOfRange(llvm::StringRef name) {
  return invalid(name, name + " does not fit in the address space: its sizes times its strides "
                              "overflow 64-bit byte offsets or wrap past the end of memory");
}

// The kernels copy rows in 16-byte pieces: base and row starts must be 16-byte aligned. A head
// dim the call copies into zero-padded memory (jit/HeadDims.h) needs only aligned elements: the
// kernels read the copies. `elementBytes`: 2 for the problem's dtype, 4 for a ring step's
// float32 outputs. `width`: its rows' elements (the problem's head dim of the tensor's kind).
llvm::Error validateTensor(const AttentionProblem &p, const Tensor &t, llvm::StringRef name,
                           int64_t heads, int64_t rows, int64_t width, int64_t elementBytes) {
  const llvm::StringRef widthName =
      width == p.headDim ? llvm::StringRef("head_dim") : llvm::StringRef("head_dim_v");
  const bool copied = headDimPadding(p) == HeadDimPadding::copy;
  const int64_t alignment = copied ? elementBytes : 16;
  const int64_t perRow = alignment / elementBytes; // elements in `alignment` bytes
  if (!t.data)
    return invalid(name, name + " is a null pointer");
  if (t.stride[3] != 1)
    return invalid(name, name + " must have unit stride along head_dim, got " + llvm::Twine(t.stride[3]));
  if (t.data % alignment != 0)
    return invalid(name, name + " is not " + llvm::Twine(alignment) + "-byte aligned");
  for (int i = p.varlen ? 1 : 0; i < 3; ++i) { // a packed batch's stride[0] is never used
    if (copied && t.stride[i] <= 0)
      return invalid(name, llvm::formatv("{0} stride[{1}] = {2} must be positive", name, i,
                                         t.stride[i]));
    if (t.stride[i] <= 0 || t.stride[i] % perRow != 0)
      return invalid(name, llvm::formatv("{0} stride[{1}] = {2} must be a positive multiple of {3} "
                                   "elements (16-byte aligned rows{4})",
                                   name, i, t.stride[i], perRow,
                                   elementBytes == 4 ? " of float32" : ""));
  }
  if (t.stride[2] < width)
    return invalid(name, llvm::formatv("{0} rows overlap: stride[2] = {1} < {2} {3}", name,
                                       t.stride[2], widthName, width));
  if (!span(t.data, {p.tensorBatch(), heads, rows, width},
            {batchStride(p, t, heads, rows), t.stride[1], t.stride[2], 1}, elementBytes))
    return outOfRange(name);
  return llvm::Error::success();
}

// A row vector is contiguous (batch, heads, rows) f32, as pack() describes it.
llvm::Error validateRows(const AttentionProblem &p, const Tensor &r, llvm::StringRef name,
                         int64_t rows) {
  if (!r.data)
    return invalid(name, name + " is a null pointer");
  if (r.data % 4 != 0)
    return invalid(name, name + " is not 4-byte aligned");
  if (!span(r.data, {p.tensorBatch(), p.heads, rows}, {p.heads * rows, rows, 1}, 4))
    return outOfRange(name);
  return llvm::Error::success();
}

// Offsets are batch + 1 contiguous int32 (their contents: validateOffsets).
llvm::Error validateOffsetsMemory(const AttentionProblem &p, const Tensor &c,
                                  llvm::StringRef name) {
  if (!c.data)
    return invalid(name, name + " is a null pointer");
  if (c.data % 4 != 0)
    return invalid(name, name + " is not 4-byte aligned");
  if (!span(c.data, {p.batch + 1}, {1}, 4))
    return outOfRange(name);
  return llvm::Error::success();
}

// A counter array is contiguous (batch, heads, ceil(longest query sequence / kCounterRows))
// int32, as pack() describes it.
int64_t counterCount(const AttentionProblem &p) {
  const int64_t blocks = (p.longestQ() + kernels::kCounterRows - 1) / kernels::kCounterRows;
  return p.batch * p.heads * blocks;
}

llvm::Error validateCounters(const AttentionProblem &p, const Tensor &c, llvm::StringRef name) {
  if (!c.data)
    return invalid(name, name + " is a null pointer");
  if (c.data % 4 != 0)
    return invalid(name, name + " is not 4-byte aligned");
  if (!span(c.data, {counterCount(p)}, {1}, 4))
    return outOfRange(name);
  return llvm::Error::success();
}

// A packed batch's bound on its sequences' lengths: at least 1 (the grid covers it), at most
// the side's total rows.
llvm::Error validateLongest(llvm::StringRef name, int64_t longest, llvm::StringRef totalName,
                            int64_t total) {
  if (longest <= 0 || longest > total)
    return invalid(name, name + " = " + llvm::Twine(longest) +
                             " must be in 1.." + totalName + " = " + llvm::Twine(total) +
                             " (the longest sequence's rows, or more)");
  return llvm::Error::success();
}

// The bytes of an operand validate() accepted (its extent fits the address space).
Footprint footprint(const AttentionProblem &p, const Tensor &t, kernels::Layout layout,
                    int64_t heads, int64_t rows, int64_t width, int64_t elementBytes) {
  switch (layout) {
  case kernels::Layout::rows:
    return Footprint::contiguous(t.data, uint64_t(p.tensorBatch() * p.heads * rows) * 4);
  case kernels::Layout::offsets:
    return Footprint::contiguous(t.data, uint64_t(p.batch + 1) * 4);
  case kernels::Layout::counters:
    return Footprint::contiguous(t.data, uint64_t(counterCount(p)) * 4);
  case kernels::Layout::tensor:
  case kernels::Layout::sums:
    break;
  }
  Footprint f;
  f.start = t.data;
  f.rowBytes = uint64_t(width * elementBytes);
  f.sizes = {p.tensorBatch(), heads, rows};
  const int64_t strides[3] = {batchStride(p, t, heads, rows), t.stride[1], t.stride[2]};
  for (size_t i = 0; i < 3; ++i) // wraps only for an unused dimension of size 1
    f.strideBytes[i] = uint64_t(strides[i]) * uint64_t(elementBytes);
  f.extentBytes = span(t.data, {f.sizes[0], f.sizes[1], f.sizes[2], width},
                       {strides[0], strides[1], strides[2], 1}, elementBytes)
                      .value_or(0);
  return f;
}

// No output shares a byte with an input or another output: a kernel's blocks would read what
// others already overwrote, or race on it. Inputs may share memory (q = k = v). `operands` in
// signature order; the error names the output first (the earlier of two outputs).
llvm::Error validateNoOverlap(llvm::ArrayRef<Operand> operands,
                              const std::array<Footprint, kernels::kOperandCount> &bytes,
                              const std::bitset<kernels::kOperandCount> &written) {
  auto isOutput = [&](Operand o) { return written[static_cast<size_t>(o)]; };
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!isOutput(operands[i]))
      continue;
    const Footprint &a = bytes[static_cast<size_t>(operands[i])];
    for (size_t j = 0; j < operands.size(); ++j) {
      if (j == i || (j < i && isOutput(operands[j]))) // a pair of outputs once
        continue;
      const Footprint &b = bytes[static_cast<size_t>(operands[j])];
      if (!mayOverlap(a, b))
        continue;
      const llvm::StringRef out = kernels::operandInfo(operands[i]).name,
                            other = kernels::operandInfo(operands[j]).name;
      return invalid(out, llvm::formatv("{0} overlaps {1}: an output must not share memory with "
                                        "an input or another output ({0}: bytes [{2:x}, {3:x}), "
                                        "{1}: [{4:x}, {5:x}))",
                                        out, other, a.start, a.start + a.extentBytes, b.start,
                                        b.start + b.extentBytes));
    }
  }
  return llvm::Error::success();
}

} // namespace

// Whether each of `kinds` runs in the problem's form: a ring step needs the kinds' ring-step
// forms.
llvm::Error validateKinds(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds) {
  for (bob::KernelKind kind : kinds)
    if (p.ringStep && !bob::hasPartialForm(kind))
      return invalid("ring_step", "ring_step: " + bob::stringifyKernelKind(kind) +
                                      " has no ring-step form (the forward's JVP is not split "
                                      "over shards)");
  return llvm::Error::success();
}

llvm::Error validateProblem(const AttentionProblem &p) {
  if (p.batch <= 0)
    return invalid("batch", "batch must be positive, got " + llvm::Twine(p.batch));
  if (p.heads <= 0)
    return invalid("heads", "heads must be positive, got " + llvm::Twine(p.heads));
  if (p.headsKv < 0)
    return invalid("heads_kv", "heads_kv must be positive (or 0 for heads), got " +
                                   llvm::Twine(p.headsKv));
  if (p.heads % p.keyValueHeads() != 0)
    return invalid("heads_kv", "heads_kv = " + llvm::Twine(p.headsKv) +
                                   " must divide heads = " + llvm::Twine(p.heads) +
                                   " (each key/value head serves a group of query heads)");
  if (p.seqQ <= 0)
    return invalid("seq_q", "seq_q (N) must be positive, got " + llvm::Twine(p.seqQ));
  if (p.seqK <= 0)
    return invalid("seq_k", "seq_k (M) must be positive, got " + llvm::Twine(p.seqK));
  if (p.varlen) {
    if (llvm::Error e = validateLongest("max_seqlen_q", p.maxSeqQ, "seq_q", p.seqQ))
      return e;
    if (llvm::Error e = validateLongest("max_seqlen_k", p.maxSeqK, "seq_k", p.seqK))
      return e;
  }
  for (auto [name, size] : {std::pair<const char *, int64_t>{"window_left", p.windowLeft},
                             {"window_right", p.windowRight}}) {
    if (size < -1)
      return invalid(name, llvm::Twine(name) + " must be -1 (unbounded) or >= 0, got " +
                               llvm::Twine(size));
    // Left sizes past M - 1 and right sizes past N - 1 hide nothing; past both sequences a
    // size is a mistake (a token count for another input, a sign lost), not a window.
    if (size > std::max(p.longestQ(), p.longestK()))
      return invalid(name, llvm::Twine(name) + " = " + llvm::Twine(size) +
                               " is larger than the sequences (" +
                               (p.varlen ? "max_seqlen_q = " : "seq_q = ") +
                               llvm::Twine(p.longestQ()) +
                               (p.varlen ? ", max_seqlen_k = " : ", seq_k = ") +
                               llvm::Twine(p.longestK()) + "): pass -1 for no bound on that side");
  }
  // Row positions, the mask's arithmetic, a block's end and TMA coordinates are 32-bit in the
  // kernels: a longer sequence would wrap there and compute something else without a fault.
  if (p.seqQ > kMaxSequence)
    return invalid("seq_q", "seq_q (N) = " + llvm::Twine(p.seqQ) + " exceeds " +
                                llvm::Twine(kMaxSequence) +
                                " (2^31 - 256: the kernels index rows with 32-bit integers)");
  if (p.seqK > kMaxSequence)
    return invalid("seq_k", "seq_k (M) = " + llvm::Twine(p.seqK) + " exceeds " +
                                llvm::Twine(kMaxSequence) +
                                " (2^31 - 256: the kernels index rows with 32-bit integers)");
  if (!bob::isSupportedHeadDim(p.headDim))
    return invalid("head_dim", "head_dim " + llvm::Twine(p.headDim) + " is unsupported (" +
                                   llvm::Twine(bob::kMinHeadDim) + " to " +
                                   llvm::Twine(bob::kMaxHeadDim) + ")" +
                                   bob::wideHeadDimNote(p.headDim));
  if (p.headDimV != 0 && !bob::isSupportedHeadDim(p.headDimV))
    return invalid("head_dim_v", "head_dim_v " + llvm::Twine(p.headDimV) +
                                     " is unsupported (0 for head_dim, or " +
                                     llvm::Twine(bob::kMinHeadDim) + " to " +
                                     llvm::Twine(bob::kMaxHeadDim) + ")" +
                                     bob::wideHeadDimNote(p.headDimV));
  // A ring step's partials (X1..X4 and the rest) are combined by callers at one width.
  if (p.ringStep && p.valueDim() != p.headDim)
    return invalid("head_dim_v", "head_dim_v = " + llvm::Twine(p.headDimV) +
                                     " differs from head_dim = " + llvm::Twine(p.headDim) +
                                     ": ring steps take one head dim for q, k and v");
  // One block row per (batch, head): grid y. Multiplied without overflow, since a product that
  // wraps could land under the limit and launch a wrong grid.
  int64_t rowsOfBlocks = 0;
  if (__builtin_mul_overflow(p.batch, p.heads, &rowsOfBlocks) || rowsOfBlocks > kMaxGridY)
    return invalid("batch", "batch * heads = " + llvm::Twine(p.batch) + " * " +
                                llvm::Twine(p.heads) + " exceeds the grid's y limit 65535");
  // The kernels compute in f32: a scale that is finite as a double can still be infinite or
  // zero (1e300, 1e-320) as a float.
  if (p.scale) {
    const double s = *p.scale;
    if (!std::isfinite(s) || s <= 0)
      return invalid("scale", "scale must be a positive finite number, got " + plain(s));
    if (s < std::numeric_limits<float>::min() || s > std::numeric_limits<float>::max())
      return invalid("scale", "scale " + plain(s) +
                                  " is out of float32's normal range [1.2e-38, 3.4e+38] (the "
                                  "kernels compute in f32)");
  }
  return llvm::Error::success();
}

// A scalar argument as the kernels read it: a normal f32 (s log2(e) overflows f32 for a scale
// f32 can still hold).
llvm::Error validateScalar(const AttentionProblem &p, kernels::Scalar scalar) {
  const float v = kernels::scalarValue(scalar, p.effectiveScale());
  if (std::isnormal(v) && v > 0)
    return llvm::Error::success();
  return invalid("scale", "scale " + plain(p.effectiveScale()) + " makes the kernels' " +
                              kernels::scalarInfo(scalar).name + " " + plain(v) +
                              ", not a positive normal float32");
}

llvm::Error validate(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds,
                     const Bindings &bindings) {
  if (llvm::Error e = validateProblem(p))
    return e;
  std::bitset<kernels::kOperandCount> checked, written;
  llvm::SmallVector<Operand, kernels::kOperandCount> operands; // in signature order
  std::array<Footprint, kernels::kOperandCount> bytes;
  if (llvm::Error e = validateKinds(p, kinds))
    return e;
  for (bob::KernelKind kind : kinds) {
    for (const kernels::Param &param : kernels::signature(kind, p.varlen, p.ringStep)) {
      if (param.isScalar) {
        if (llvm::Error e = validateScalar(p, param.scalar))
          return e;
        continue;
      }
      const size_t i = static_cast<size_t>(param.operand);
      // An operation's output even where a later kernel of it reads it (bwd_kv reads D).
      if (param.output)
        written.set(i);
      if (checked[i])
        continue;
      checked.set(i);
      operands.push_back(param.operand);
      const kernels::OperandInfo &info = kernels::operandInfo(param.operand);
      if (!bindings.bound(param.operand))
        return invalid(info.name, info.name + " is not given");
      const bool query = info.side == kernels::Side::query;
      const int64_t rows = query ? p.seqQ : p.seqK;
      const Tensor &t = bindings[param.operand];
      const int64_t heads = query ? p.heads : p.keyValueHeads();
      const int64_t width = p.width(info.width);
      const int64_t elementBytes =
          kernels::isFloat32Tensor(param, p.ringStep) || info.layout == kernels::Layout::sums
              ? 4
              : 2;
      llvm::Error e = llvm::Error::success();
      switch (info.layout) {
      case kernels::Layout::rows: e = validateRows(p, t, info.name, rows); break;
      case kernels::Layout::offsets: e = validateOffsetsMemory(p, t, info.name); break;
      case kernels::Layout::counters: e = validateCounters(p, t, info.name); break;
      case kernels::Layout::tensor:
      case kernels::Layout::sums:
        e = validateTensor(p, t, info.name, heads, rows, width, elementBytes);
        break;
      }
      if (e)
        return e;
      bytes[i] = footprint(p, t, info.layout, heads, rows, width, elementBytes);
    }
  }
  return validateNoOverlap(operands, bytes, written);
}

llvm::Error validateOffsets(const AttentionProblem &p, const Bindings &bindings,
                            CUstream stream) {
  // Read once: this is on every packed call's path (support/Knobs.h).
  static const bool check = support::knobs::checkOffsets();
  if (!p.varlen || !check)
    return llvm::Error::success();
  auto driver = runtime::CudaDriver::get();
  if (!driver)
    return driver.takeError();
  // A stream being captured into a CUDA graph cannot be waited on, and the graph's replays may
  // see other offsets anyway: the kernels' clamping keeps them inside the tensors then.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver->api().cuStreamIsCapturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    support::log(support::LogLevel::Debug,
                 "flashbob: cu_seqlens not checked while the stream is captured");
    return llvm::Error::success();
  }
  // The offsets may come from work queued on the stream before this call.
  FLASHBOB_CU(*driver, cuStreamSynchronize(stream));
  std::vector<int32_t> host(static_cast<size_t>(p.batch) + 1);
  for (auto [operand, total, longest, longestName] :
       {std::tuple{Operand::cuSeqlensQ, p.seqQ, p.maxSeqQ, "max_seqlen_q"},
        std::tuple{Operand::cuSeqlensK, p.seqK, p.maxSeqK, "max_seqlen_k"}}) {
    const llvm::StringRef name = kernels::operandInfo(operand).name;
    FLASHBOB_CU(*driver, cuMemcpyDtoH(host.data(), bindings[operand].data,
                                      host.size() * sizeof(int32_t)));
    if (host.front() != 0)
      return invalid(name, name + "[0] = " + llvm::Twine(host.front()) + " must be 0");
    for (size_t i = 1; i < host.size(); ++i) {
      const int64_t length = int64_t(host[i]) - host[i - 1];
      if (length < 0)
        return invalid(name, llvm::formatv("{0} must not decrease: {0}[{1}] = {2} < {0}[{3}] = "
                                           "{4}",
                                           name, i, host[i], i - 1, host[i - 1]));
      if (length > longest)
        return invalid(longestName,
                       llvm::formatv("sequence {0} has {1} rows ({2}[{3}] - {2}[{0}]), more than "
                                     "{4} = {5}",
                                     i - 1, length, name, i, longestName, longest));
    }
    if (host.back() != total)
      return invalid(name, llvm::formatv("{0}[{1}] = {2} must be the total rows of the packed "
                                         "tensors, {3}",
                                         name, host.size() - 1, host.back(), total));
  }
  return llvm::Error::success();
}

} // namespace flashbob::jit
