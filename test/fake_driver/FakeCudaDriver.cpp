// A fake CUDA driver: libfake_cuda.so, loaded in place of libcuda.so.1 with
// FLASHBOB_CUDA_DRIVER=<path>, so that everything between argument checking and the launch
// (validation order, the kernel cache, tuning records, metadata, error classification) runs in
// CPU tests. It exports cuGetProcAddress_v2, the one symbol runtime/driver/CudaDriver.cpp takes
// by name, and hands out every entry point that FLASHBOB_CUDA_DRIVER_ENTRY_POINTS lists (a new
// one that is not faked here fails this file's build, not a test at run time).
//
// The device: one H200-like GPU (sm_90, 132 SMs, 227 KB of shared memory per block opt-in).
// "Device" memory is host memory; copies and memsets are memcpy / memset; kernels do not run: a
// launch is recorded. A module image must be a cubin or PTX whose kernels' parameters the fake
// can read (KernelParams.h), as the real driver reads them: cuFuncGetParamInfo answers from them
// and a launch reads every parameter its kernelParams point to, refusing one whose 128 bytes are
// not a tensor map this driver encoded (the kernels take CUtensorMaps by value). Environment:
//   FAKE_CUDA_CC=75           the compute capability (major * 10 + minor), default 90
//   FAKE_CUDA_DEVICES=0       the device count, default 1
//   FAKE_CUDA_FAIL=call:ERR[,call:ERR...]
//                             the named entry points return ERR (a CUDA_ERROR_* name or a number)
//   FAKE_CUDA_LOG=path        every call's name appended to path, one line each; a launch's line
//                             reads "cuLaunchKernel <entry> grid=X,Y,Z block=X,Y,Z shared=B"
//   FAKE_CUDA_CAPTURING=1     every stream is being captured into a CUDA graph (cuStreamIsCapturing);
//                             then cuStreamSynchronize and cuEventSynchronize fail, as they do
//                             on a capturing stream, with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
//   FAKE_CUDA_MEMORY_POOLS=0  the device has no memory pools (stream-ordered allocation): its
//                             attribute reads 0 and cuMemAllocAsync fails with
//                             CUDA_ERROR_NOT_SUPPORTED; default 1
// 2D and 3D copies and memsets check their arguments as the real driver's documentation states
// them (a pitch at least the row's bytes, a 3D array's height at least the copy's) and then
// copy or set host memory: tests that make the API copy give it real memory.
// cuMemAllocAsync fills its memory with a pattern (not zeros) and cuMemFreeAsync keeps it until
// fake_cuda_reset, so a test can read what a call's scratch memory held.
// In-process tests can read launches back with fake_cuda_launch_count / fake_cuda_launch, and
// count the calls of any entry point since the last reset with fake_cuda_call_count.
#define LLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING 1 // the runtime's header only, no LLVM linked
#include "runtime/driver/CudaDriver.h"
#include "test/fake_driver/FakeCudaDriver.h"
#include "test/fake_driver/KernelParams.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Function {
  std::string entry;
  std::vector<fake_cuda::Param> params;
  int maxDynamicShared = 48 * 1024;
};
struct Module {
  std::map<std::string, std::vector<fake_cuda::Param>> kernels;
  std::vector<Function *> functions;
};

// What cuTensorMapEncodeTiled writes after the tensor's address: a launch checks for it. What
// it was given follows at kTensorMapRecordOffset, for the launch's record.
constexpr char kTensorMapTag[16] = "fake tensor map";
constexpr size_t kTensorMapBytes = sizeof(CUtensorMap);
constexpr size_t kTensorMapRecordOffset = 32;
static_assert(kTensorMapRecordOffset + sizeof(fake_cuda_tensor_map) <= kTensorMapBytes);

std::mutex mutex;
std::vector<fake_cuda_launch_record> launches;
// Entry point -> calls since the last reset. Never destroyed: a process's kernel cache (a static
// of the library) unloads its modules at exit, possibly after this library's globals are gone.
std::map<std::string, int> &calls = *new std::map<std::string, int>();
// Memory freed with cuMemFreeAsync, kept until the next reset so that a test can read what a
// call's stream-ordered scratch memory held when its kernels were launched.
std::vector<void *> freedAsync;
int contextTag = 0, streamTag = 0, eventTag = 0; // addresses of these are the handles

// CUDA_ERROR_* names the fake knows (FAKE_CUDA_FAIL, cuGetErrorName).
const struct {
  const char *name;
  CUresult value;
} kErrors[] = {
    {"CUDA_SUCCESS", CUDA_SUCCESS},
    {"CUDA_ERROR_INVALID_VALUE", CUDA_ERROR_INVALID_VALUE},
    {"CUDA_ERROR_OUT_OF_MEMORY", CUDA_ERROR_OUT_OF_MEMORY},
    {"CUDA_ERROR_NOT_INITIALIZED", CUDA_ERROR_NOT_INITIALIZED},
    {"CUDA_ERROR_NO_DEVICE", CUDA_ERROR_NO_DEVICE},
    {"CUDA_ERROR_INVALID_DEVICE", CUDA_ERROR_INVALID_DEVICE},
    {"CUDA_ERROR_INVALID_IMAGE", CUDA_ERROR_INVALID_IMAGE},
    {"CUDA_ERROR_INVALID_CONTEXT", CUDA_ERROR_INVALID_CONTEXT},
    {"CUDA_ERROR_NO_BINARY_FOR_GPU", CUDA_ERROR_NO_BINARY_FOR_GPU},
    {"CUDA_ERROR_INVALID_PTX", CUDA_ERROR_INVALID_PTX},
    {"CUDA_ERROR_INVALID_HANDLE", CUDA_ERROR_INVALID_HANDLE},
    {"CUDA_ERROR_NOT_FOUND", CUDA_ERROR_NOT_FOUND},
    {"CUDA_ERROR_ILLEGAL_ADDRESS", CUDA_ERROR_ILLEGAL_ADDRESS},
    {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES},
    {"CUDA_ERROR_LAUNCH_FAILED", CUDA_ERROR_LAUNCH_FAILED},
    {"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
    {"CUDA_ERROR_NOT_SUPPORTED", CUDA_ERROR_NOT_SUPPORTED},
    {"CUDA_ERROR_UNKNOWN", CUDA_ERROR_UNKNOWN},
};

int envInt(const char *name, int fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// The failure FAKE_CUDA_FAIL names for `call` (CUDA_SUCCESS for none). Read on every call, so
// an in-process test can set and unset it between calls.
CUresult injectedFailure(const char *call) {
  const char *spec = std::getenv("FAKE_CUDA_FAIL");
  const std::string all = spec ? spec : "";
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(',', start);
    if (end == std::string::npos)
      end = all.size();
    const std::string item = all.substr(start, end - start);
    const size_t colon = item.find(':');
    if (colon != std::string::npos && item.compare(0, colon, call) == 0 &&
        std::strlen(call) == colon) {
      const std::string error = item.substr(colon + 1);
      for (const auto &e : kErrors)
        if (error == e.name)
          return e.value;
      return CUresult(std::atoi(error.c_str()));
    }
    start = end + 1;
  }
  return CUDA_SUCCESS;
}

void log(const std::string &line) {
  const char *path = std::getenv("FAKE_CUDA_LOG");
  if (!path || !*path)
    return;
  if (FILE *f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

// Every entry point starts here: logs the call, and returns the failure FAKE_CUDA_FAIL asks for
// (CUDA_SUCCESS otherwise).
CUresult enter(const char *call) {
  if (std::strcmp(call, "cuLaunchKernel") != 0) // a launch logs its own, longer line
    log(call);
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++calls[call];
  }
  return injectedFailure(call);
}

#define ENTER(call)                                                                               \
  if (CUresult failure = enter(call); failure != CUDA_SUCCESS)                                    \
    return failure

int computeCapability() { return envInt("FAKE_CUDA_CC", 90); }
bool memoryPools() { return envInt("FAKE_CUDA_MEMORY_POOLS", 1) != 0; }

// ---- the entry points (signatures: the PFN_ typedefs of cudaTypedefs.h) ----

CUresult fake_cuInit(unsigned int) {
  ENTER("cuInit");
  return envInt("FAKE_CUDA_DEVICES", 1) > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
CUresult fake_cuDriverGetVersion(int *version) {
  ENTER("cuDriverGetVersion");
  *version = 13000;
  return CUDA_SUCCESS;
}
CUresult fake_cuGetErrorName(CUresult error, const char **name) {
  for (const auto &e : kErrors)
    if (e.value == error) {
      *name = e.name;
      return CUDA_SUCCESS;
    }
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult fake_cuGetErrorString(CUresult error, const char **text) {
  *text = error == CUDA_SUCCESS ? "no error" : "injected by the fake CUDA driver";
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetCount(int *count) {
  ENTER("cuDeviceGetCount");
  *count = envInt("FAKE_CUDA_DEVICES", 1);
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGet(CUdevice *device, int ordinal) {
  ENTER("cuDeviceGet");
  if (ordinal < 0 || ordinal >= envInt("FAKE_CUDA_DEVICES", 1))
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetName(char *name, int length, CUdevice) {
  ENTER("cuDeviceGetName");
  std::snprintf(name, size_t(length), "Fake H200 (sm_%d)", computeCapability());
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice) {
  ENTER("cuDeviceGetAttribute");
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = computeCapability() / 10; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = computeCapability() % 10; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 227 * 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 48 * 1024; break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 60 * 1024 * 1024; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = memoryPools(); break;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *value = 2147483647; break;
  default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice) {
  ENTER("cuDeviceTotalMem");
  *bytes = size_t(141) << 30;
  return CUDA_SUCCESS;
}
CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
  ENTER("cuDevicePrimaryCtxRetain");
  *context = reinterpret_cast<CUcontext>(&contextTag);
  return CUDA_SUCCESS;
}
CUresult fake_cuDevicePrimaryCtxRelease(CUdevice) {
  ENTER("cuDevicePrimaryCtxRelease");
  return CUDA_SUCCESS;
}
thread_local CUcontext current = nullptr;
CUresult fake_cuCtxGetCurrent(CUcontext *context) {
  ENTER("cuCtxGetCurrent");
  *context = current;
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxSetCurrent(CUcontext context) {
  ENTER("cuCtxSetCurrent");
  current = context;
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxGetDevice(CUdevice *device) {
  ENTER("cuCtxGetDevice");
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxSynchronize() {
  ENTER("cuCtxSynchronize");
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxCreate(CUcontext *context, unsigned int, CUdevice) {
  ENTER("cuCtxCreate");
  *context = current = reinterpret_cast<CUcontext>(&contextTag);
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxDestroy(CUcontext) {
  ENTER("cuCtxDestroy");
  return CUDA_SUCCESS;
}
CUresult fake_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int,
                                 CUjit_option *, void **) {
  ENTER("cuModuleLoadDataEx");
  auto kernels = fake_cuda::readKernelParams(image);
  if (!kernels)
    return CUDA_ERROR_INVALID_IMAGE;
  *module = reinterpret_cast<CUmodule>(new Module{std::move(*kernels), {}});
  return CUDA_SUCCESS;
}
CUresult fake_cuModuleUnload(CUmodule module) {
  ENTER("cuModuleUnload");
  Module *m = reinterpret_cast<Module *>(module);
  for (Function *f : m->functions)
    delete f;
  delete m;
  return CUDA_SUCCESS;
}
CUresult fake_cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
  ENTER("cuModuleGetFunction");
  Module *m = reinterpret_cast<Module *>(module);
  auto kernel = m->kernels.find(name);
  if (kernel == m->kernels.end())
    return CUDA_ERROR_NOT_FOUND;
  Function *f = new Function{name, kernel->second};
  m->functions.push_back(f);
  *function = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}
CUresult fake_cuFuncGetAttribute(int *value, CUfunction_attribute attribute, CUfunction function) {
  ENTER("cuFuncGetAttribute");
  *value = attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
               ? reinterpret_cast<Function *>(function)->maxDynamicShared
               : 0;
  return CUDA_SUCCESS;
}
CUresult fake_cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  ENTER("cuFuncSetAttribute");
  // As the real driver: no more dynamic shared memory than the device's opt-in limit.
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > 227 * 1024)
      return CUDA_ERROR_INVALID_VALUE;
    reinterpret_cast<Function *>(function)->maxDynamicShared = value;
  }
  return CUDA_SUCCESS;
}
CUresult fake_cuFuncGetParamInfo(CUfunction function, size_t index, size_t *offset,
                                 size_t *size) {
  ENTER("cuFuncGetParamInfo");
  const Function *f = reinterpret_cast<const Function *>(function);
  if (!offset || index >= f->params.size())
    return CUDA_ERROR_INVALID_VALUE;
  *offset = f->params[index].offset;
  if (size)
    *size = f->params[index].size;
  return CUDA_SUCCESS;
}

// Reads every parameter of `f` from `params` as the real driver copies them (a pointer to less
// than the parameter's size is a read past the end, which the sanitizers report) and records
// what it can recognise: the 128-byte ones must be tensor maps this driver encoded, the 4-byte
// ones are the kernels' f32 scalars. Returns the index of a bad parameter, or -1.
int readParams(const Function *f, void **params, fake_cuda_launch_record &r) {
  if (!f->params.empty() && !params)
    return 0;
  r.params = unsigned(f->params.size());
  for (size_t i = 0; i < f->params.size(); ++i) {
    std::vector<unsigned char> bytes(f->params[i].size);
    if (!params[i])
      return int(i);
    std::memcpy(bytes.data(), params[i], bytes.size());
    if (bytes.size() == kTensorMapBytes) {
      if (std::memcmp(bytes.data() + 8, kTensorMapTag, sizeof(kTensorMapTag)) != 0)
        return int(i);
      if (r.tensorMaps < std::size(r.maps))
        std::memcpy(&r.maps[r.tensorMaps], bytes.data() + kTensorMapRecordOffset,
                    sizeof(fake_cuda_tensor_map));
      ++r.tensorMaps;
    } else if (bytes.size() == 4 && r.scalarCount < 4) {
      std::memcpy(&r.scalars[r.scalarCount++], bytes.data(), 4);
    } else if (bytes.size() == 8 && r.wordCount < std::size(r.words)) {
      std::memcpy(&r.words[r.wordCount++], bytes.data(), 8);
    }
  }
  return -1;
}

CUresult fake_cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz,
                             unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream,
                             void **params, void **extra) {
  const Function *f = reinterpret_cast<const Function *>(function);
  char line[512];
  std::snprintf(line, sizeof(line), "cuLaunchKernel %s grid=%u,%u,%u block=%u,%u,%u shared=%u",
                f->entry.c_str(), gx, gy, gz, bx, by, bz, shared);
  log(line);
  ENTER("cuLaunchKernel");
  // As the real driver: the grid's limits, and the dynamic shared memory the kernel opted in to.
  if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535 ||
      bx * by * bz > 1024 || int(shared) > f->maxDynamicShared || extra)
    return CUDA_ERROR_INVALID_VALUE;
  fake_cuda_launch_record r{};
  if (int bad = readParams(f, params, r); bad >= 0) {
    log("cuLaunchKernel: parameter " + std::to_string(bad) + " of " + f->entry +
        " is not what the kernel takes");
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::snprintf(r.entry, sizeof(r.entry), "%s", f->entry.c_str());
  r.grid[0] = gx, r.grid[1] = gy, r.grid[2] = gz;
  r.block[0] = bx, r.block[1] = by, r.block[2] = bz;
  r.sharedBytes = shared;
  std::lock_guard<std::mutex> lock(mutex);
  launches.push_back(r);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  ENTER("cuMemAlloc");
  void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemFree(CUdeviceptr pointer) {
  ENTER("cuMemFree");
  std::free(reinterpret_cast<void *>(pointer));
  return CUDA_SUCCESS;
}
CUresult fake_cuMemGetInfo(size_t *free, size_t *total) {
  ENTER("cuMemGetInfo");
  *free = size_t(140) << 30;
  *total = size_t(141) << 30;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyHtoD(CUdeviceptr to, const void *from, size_t bytes) {
  ENTER("cuMemcpyHtoD");
  std::memcpy(reinterpret_cast<void *>(to), from, bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr to, const void *from, size_t bytes, CUstream) {
  ENTER("cuMemcpyHtoDAsync");
  std::memcpy(reinterpret_cast<void *>(to), from, bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyDtoH(void *to, CUdeviceptr from, size_t bytes) {
  ENTER("cuMemcpyDtoH");
  std::memcpy(to, reinterpret_cast<const void *>(from), bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyDtoD(CUdeviceptr to, CUdeviceptr from, size_t bytes) {
  ENTER("cuMemcpyDtoD");
  std::memmove(reinterpret_cast<void *>(to), reinterpret_cast<const void *>(from), bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD8(CUdeviceptr to, unsigned char value, size_t count) {
  ENTER("cuMemsetD8");
  std::memset(reinterpret_cast<void *>(to), value, count);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD32(CUdeviceptr to, unsigned int value, size_t count) {
  ENTER("cuMemsetD32");
  auto *p = reinterpret_cast<unsigned int *>(to);
  for (size_t i = 0; i < count; ++i)
    p[i] = value;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD32Async(CUdeviceptr to, unsigned int value, size_t count, CUstream) {
  ENTER("cuMemsetD32Async");
  auto *p = reinterpret_cast<unsigned int *>(to);
  for (size_t i = 0; i < count; ++i)
    p[i] = value;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes, CUstream) {
  ENTER("cuMemAllocAsync");
  if (!memoryPools())
    return CUDA_ERROR_NOT_SUPPORTED;
  const size_t size = (bytes + 255) / 256 * 256;
  auto *p = static_cast<unsigned char *>(std::aligned_alloc(256, size));
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  // Not zeros: what a test finds where nothing wrote is recognisable and differs by place.
  for (size_t i = 0; i < size; ++i)
    p[i] = static_cast<unsigned char>(i * 131 + 7);
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemFreeAsync(CUdeviceptr pointer, CUstream) {
  ENTER("cuMemFreeAsync");
  std::lock_guard<std::mutex> lock(mutex);
  freedAsync.push_back(reinterpret_cast<void *>(pointer));
  return CUDA_SUCCESS;
}
// The address a 2D/3D copy's side starts at, whatever its memory type (all host memory here).
char *copySide(CUmemorytype type, const void *host, CUdeviceptr device) {
  return type == CU_MEMORYTYPE_HOST ? static_cast<char *>(const_cast<void *>(host))
                                    : reinterpret_cast<char *>(device);
}
CUresult fake_cuMemcpy3DAsync(const CUDA_MEMCPY3D *c, CUstream) {
  ENTER("cuMemcpy3DAsync");
  if (!c || c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY ||
      c->srcLOD || c->dstLOD || c->reserved0 || c->reserved1)
    return CUDA_ERROR_INVALID_VALUE;
  // As the driver: rows of WidthInBytes within each pitch, Height rows within each side's
  // array height, every pitch within the device's limit.
  if (c->srcPitch < c->WidthInBytes + c->srcXInBytes || c->dstPitch < c->WidthInBytes + c->dstXInBytes ||
      c->srcPitch > 2147483647u || c->dstPitch > 2147483647u)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->Depth > 1 && (c->srcHeight < c->Height + c->srcY || c->dstHeight < c->Height + c->dstY))
    return CUDA_ERROR_INVALID_VALUE;
  char *src = copySide(c->srcMemoryType, c->srcHost, c->srcDevice);
  char *dst = copySide(c->dstMemoryType, c->dstHost, c->dstDevice);
  for (size_t z = 0; z < c->Depth; ++z)
    for (size_t y = 0; y < c->Height; ++y)
      std::memmove(dst + ((c->dstZ + z) * c->dstHeight + c->dstY + y) * c->dstPitch + c->dstXInBytes,
                   src + ((c->srcZ + z) * c->srcHeight + c->srcY + y) * c->srcPitch + c->srcXInBytes,
                   c->WidthInBytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream) {
  ENTER("cuMemcpy2DAsync");
  if (!c || c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->srcPitch < c->WidthInBytes + c->srcXInBytes || c->dstPitch < c->WidthInBytes + c->dstXInBytes ||
      c->srcPitch > 2147483647u || c->dstPitch > 2147483647u)
    return CUDA_ERROR_INVALID_VALUE;
  char *src = copySide(c->srcMemoryType, c->srcHost, c->srcDevice);
  char *dst = copySide(c->dstMemoryType, c->dstHost, c->dstDevice);
  for (size_t y = 0; y < c->Height; ++y)
    std::memmove(dst + (c->dstY + y) * c->dstPitch + c->dstXInBytes,
                 src + (c->srcY + y) * c->srcPitch + c->srcXInBytes, c->WidthInBytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD2D8Async(CUdeviceptr to, size_t pitch, unsigned char value, size_t width,
                                size_t height, CUstream) {
  ENTER("cuMemsetD2D8Async");
  if (height > 1 && (pitch < width || pitch > 2147483647u))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t y = 0; y < height; ++y)
    std::memset(reinterpret_cast<char *>(to) + y * pitch, value, width);
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamCreate(CUstream *stream, unsigned int) {
  ENTER("cuStreamCreate");
  *stream = reinterpret_cast<CUstream>(&streamTag);
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamDestroy(CUstream) {
  ENTER("cuStreamDestroy");
  return CUDA_SUCCESS;
}
bool capturing() { return envInt("FAKE_CUDA_CAPTURING", 0) != 0; }
CUresult fake_cuStreamSynchronize(CUstream) {
  ENTER("cuStreamSynchronize");
  return capturing() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
CUresult fake_cuStreamIsCapturing(CUstream, CUstreamCaptureStatus *status) {
  ENTER("cuStreamIsCapturing");
  *status = capturing() ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult fake_cuEventCreate(CUevent *event, unsigned int) {
  ENTER("cuEventCreate");
  *event = reinterpret_cast<CUevent>(&eventTag);
  return CUDA_SUCCESS;
}
CUresult fake_cuEventDestroy(CUevent) {
  ENTER("cuEventDestroy");
  return CUDA_SUCCESS;
}
CUresult fake_cuEventRecord(CUevent, CUstream) {
  ENTER("cuEventRecord");
  return CUDA_SUCCESS;
}
CUresult fake_cuEventSynchronize(CUevent) {
  ENTER("cuEventSynchronize");
  return capturing() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
CUresult fake_cuEventElapsedTime(float *ms, CUevent, CUevent) {
  ENTER("cuEventElapsedTime");
  *ms = 1.0f; // every timed interval: 1 ms
  return CUDA_SUCCESS;
}
CUresult fake_cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType, cuuint32_t rank,
                                     void *address, const cuuint64_t *dims, const cuuint64_t *,
                                     const cuuint32_t *box, const cuuint32_t *,
                                     CUtensorMapInterleave, CUtensorMapSwizzle swizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  ENTER("cuTensorMapEncodeTiled");
  if (rank == 0 || rank > 5 || reinterpret_cast<uintptr_t>(address) % 16 != 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::memset(map, 0, sizeof(*map));
  std::memcpy(map, &address, sizeof(address)); // something recognisable
  std::memcpy(reinterpret_cast<char *>(map) + 8, kTensorMapTag, sizeof(kTensorMapTag));
  fake_cuda_tensor_map given{reinterpret_cast<uintptr_t>(address), rank > 1 ? dims[1] : 0,
                             dims[0], {box[0], rank > 1 ? box[1] : 1}, unsigned(swizzle)};
  std::memcpy(reinterpret_cast<char *>(map) + kTensorMapRecordOffset, &given, sizeof(given));
  return CUDA_SUCCESS;
}

// name -> entry point, typed by the runtime's own list: a PFN_ mismatch does not compile.
struct Entry {
  const char *name;
  void *function;
};
const Entry kEntries[] = {
#define FAKE_ENTRY(name, abi)                                                                     \
  {#name, reinterpret_cast<void *>(static_cast<PFN_##name##_v##abi>(&fake_##name))},
    FLASHBOB_CUDA_DRIVER_ENTRY_POINTS(FAKE_ENTRY)
#undef FAKE_ENTRY
};

} // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **function, int, cuuint64_t,
                    CUdriverProcAddressQueryResult *status) {
  for (const Entry &e : kEntries)
    if (std::strcmp(e.name, symbol) == 0) {
      *function = e.function;
      if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *function = nullptr;
  if (status)
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) int fake_cuda_launch_count(void) {
  std::lock_guard<std::mutex> lock(mutex);
  return int(launches.size());
}

__attribute__((visibility("default"))) int fake_cuda_launch(int i,
                                                            fake_cuda_launch_record *record) {
  std::lock_guard<std::mutex> lock(mutex);
  if (i < 0 || size_t(i) >= launches.size())
    return 0;
  *record = launches[size_t(i)];
  return 1;
}

__attribute__((visibility("default"))) void fake_cuda_reset(void) {
  std::lock_guard<std::mutex> lock(mutex);
  launches.clear();
  calls.clear();
  for (void *p : freedAsync)
    std::free(p);
  freedAsync.clear();
}

__attribute__((visibility("default"))) int fake_cuda_call_count(const char *entry) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = calls.find(entry);
  return it == calls.end() ? 0 : it->second;
}

} // extern "C"
