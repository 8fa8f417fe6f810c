#include "runtime/launch/RowCopy.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>

namespace flashbob::runtime {
namespace {

struct Dim {
  int64_t extent, src, dst; // strides in bytes
};

} // namespace

std::vector<CUDA_MEMCPY3D> planRowCopy(const int64_t extents[3], const RowArray &src,
                                       const RowArray &dst, int64_t rowBytes, int64_t maxPitch) {
  // Outermost first: by the source's strides, largest first (a stable order for equal ones).
  llvm::SmallVector<Dim, 3> dims;
  for (int i = 0; i < 3; ++i)
    if (extents[i] > 1)
      dims.push_back({extents[i], src.strideBytes[i], dst.strideBytes[i]});
  std::stable_sort(dims.begin(), dims.end(), [](const Dim &a, const Dim &b) { return a.src > b.src; });
  // A dimension whose step is the next inner one's whole run on both sides joins it.
  for (size_t i = dims.size(); i-- > 1;) {
    Dim &outer = dims[i - 1], &inner = dims[i];
    if (outer.src == inner.extent * inner.src && outer.dst == inner.extent * inner.dst) {
      inner.extent *= outer.extent;
      dims.erase(dims.begin() + (i - 1));
    }
  }
  // The copies' rows: the innermost dimension whose pitches hold a row (else one row a copy).
  auto holdsRows = [&](const Dim &d) {
    return d.src >= rowBytes && d.dst >= rowBytes && d.src <= maxPitch && d.dst <= maxPitch;
  };
  int height = -1;
  for (int i = int(dims.size()) - 1; i >= 0 && height < 0; --i)
    if (holdsRows(dims[size_t(i)]))
      height = i;
  // Their depth: the next dimension out, if its step is a whole number of pitches on both sides
  // that leaves room for the rows (the 3D copy's array height).
  int depth = -1;
  if (height > 0) {
    const Dim &h = dims[size_t(height)], &d = dims[size_t(height - 1)];
    if (d.src % h.src == 0 && d.dst % h.dst == 0 && d.src / h.src >= h.extent &&
        d.dst / h.dst >= h.extent)
      depth = height - 1;
  }
  CUDA_MEMCPY3D copy{};
  copy.srcMemoryType = copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.WidthInBytes = size_t(rowBytes);
  copy.Height = copy.Depth = 1;
  copy.srcPitch = copy.dstPitch = size_t(rowBytes);
  if (height >= 0) {
    const Dim &h = dims[size_t(height)];
    copy.Height = size_t(h.extent);
    copy.srcPitch = size_t(h.src);
    copy.dstPitch = size_t(h.dst);
  }
  if (depth >= 0) {
    const Dim &d = dims[size_t(depth)];
    copy.Depth = size_t(d.extent);
    copy.srcHeight = size_t(d.src) / copy.srcPitch;
    copy.dstHeight = size_t(d.dst) / copy.dstPitch;
  }
  // Every other dimension is a loop of such copies.
  llvm::SmallVector<Dim, 3> loops;
  for (int i = 0; i < int(dims.size()); ++i)
    if (i != height && i != depth)
      loops.push_back(dims[size_t(i)]);
  std::vector<CUDA_MEMCPY3D> copies;
  llvm::SmallVector<int64_t, 3> at(loops.size(), 0);
  while (true) {
    CUDA_MEMCPY3D c = copy;
    c.srcDevice = src.base;
    c.dstDevice = dst.base;
    for (size_t i = 0; i < loops.size(); ++i) {
      c.srcDevice += CUdeviceptr(at[i] * loops[i].src);
      c.dstDevice += CUdeviceptr(at[i] * loops[i].dst);
    }
    copies.push_back(c);
    size_t i = loops.size();
    while (i > 0 && ++at[i - 1] == loops[i - 1].extent)
      at[--i] = 0;
    if (i == 0)
      break;
  }
  return copies;
}

llvm::Error copyRows(CudaDriver &driver, const int64_t extents[3], const RowArray &src,
                     const RowArray &dst, int64_t rowBytes, int64_t maxPitch, CUstream stream) {
  for (const CUDA_MEMCPY3D &c : planRowCopy(extents, src, dst, rowBytes, maxPitch)) {
    if (c.Depth > 1) {
      FLASHBOB_CU(driver, cuMemcpy3DAsync(&c, stream));
      continue;
    }
    CUDA_MEMCPY2D flat{};
    flat.srcMemoryType = flat.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    flat.srcDevice = c.srcDevice;
    flat.dstDevice = c.dstDevice;
    flat.srcPitch = c.srcPitch;
    flat.dstPitch = c.dstPitch;
    flat.WidthInBytes = c.WidthInBytes;
    flat.Height = c.Height;
    FLASHBOB_CU(driver, cuMemcpy2DAsync(&flat, stream));
  }
  return llvm::Error::success();
}

} // namespace flashbob::runtime
