// The part of XLA's FFI C ABI that the prebuilt JAX handlers (XlaFfi.cpp) use, declared here
// from its published layout (xla/ffi/api/c_api.h, API version 0.1 and later minors), so that
// libflashbob.so can carry the handlers without jaxlib's headers where the wheel is built.
//
// Every struct XLA passes begins with its own size; XLA's minor versions only append fields and
// API functions, so the offsets below hold for every 0.x with x >= 1. The handlers check the
// sizes they are given before reading a field, report 0.1 to XLA's metadata query (XLA refuses
// a handler of an API it cannot serve), and flashbob.jax registers them only when the installed
// jaxlib's header says major 0, minor >= 1 (python/flashbob/jax/_ffi.py); otherwise the shim
// compiled against that header is used. test/python/test_jax_attention.py compiles this file
// against jaxlib's c_api.h on the GPU machine and compares every offset and size it uses.
//
// Names are ours; only the layouts (field order and types) are XLA's.
#ifndef FLASHBOB_API_XLAFFIABI_H
#define FLASHBOB_API_XLAFFIABI_H

#include <cstddef>
#include <cstdint>

namespace flashbob::xla_ffi {

constexpr int kApiMajor = 0, kApiMinor = 1; // the version these declarations follow

struct ExtensionBase {
  size_t structSize;
  int type; // 1: the metadata query
  ExtensionBase *next;
};
constexpr int kMetadataExtension = 1;

struct ApiVersion {
  size_t structSize;
  ExtensionBase *extensionStart;
  int major, minor;
};

struct Error; // opaque: made by the API's error constructor, owned by XLA once returned
struct ExecutionContext;

// Error codes (absl's), the three the handlers return.
constexpr int kInvalidArgument = 3, kFailedPrecondition = 9, kInternal = 13;

struct ErrorCreateArgs {
  size_t structSize;
  ExtensionBase *extensionStart;
  const char *message;
  int code;
};

struct StreamGetArgs {
  size_t structSize;
  ExtensionBase *extensionStart;
  ExecutionContext *context;
  void *stream; // out: the CUstream
};

// The API table XLA passes with each call: its first function pointers, in XLA's order.
struct Api {
  size_t structSize;
  ExtensionBase *extensionStart;
  ApiVersion version;
  void *internalApi;
  Error *(*errorCreate)(ErrorCreateArgs *);
  void (*errorGetMessage)(void *);
  void (*errorDestroy)(void *);
  void *(*handlerRegister)(void *);
  Error *(*streamGet)(StreamGetArgs *);
};

// Element types (xla::PrimitiveType), those the handlers read.
constexpr int kS32 = 4, kS64 = 5, kF16 = 10, kF32 = 11, kF64 = 12, kBF16 = 16;

struct Buffer {
  size_t structSize;
  ExtensionBase *extensionStart;
  int dtype;
  void *data;
  int64_t rank;
  int64_t *dims;
};

struct ByteSpan {
  const char *ptr;
  size_t length;
};

struct Scalar {
  int dtype;
  void *value;
};
constexpr int kBufferArg = 1, kBufferRet = 1, kScalarAttr = 3;

struct Args {
  size_t structSize;
  ExtensionBase *extensionStart;
  int64_t size;
  int *types;
  void **args;
};

struct Rets {
  size_t structSize;
  ExtensionBase *extensionStart;
  int64_t size;
  int *types;
  void **rets;
};

// Sorted by name.
struct Attrs {
  size_t structSize;
  ExtensionBase *extensionStart;
  int64_t size;
  int *types;
  ByteSpan **names;
  void **attrs;
};

constexpr int kExecuteStage = 3;

struct CallFrame {
  size_t structSize;
  ExtensionBase *extensionStart;
  const Api *api;
  ExecutionContext *context;
  int stage;
  Args args;
  Rets rets;
  Attrs attrs;
};

// The answer to XLA's metadata query (an extension of type kMetadataExtension on the frame).
struct Metadata {
  size_t structSize;
  ApiVersion version;
  uint32_t traits;
};

struct MetadataExtension {
  ExtensionBase base;
  Metadata *metadata;
};

using Handler = Error *(CallFrame *);

} // namespace flashbob::xla_ffi

#endif // FLASHBOB_API_XLAFFIABI_H
