// api/XlaFfiAbi.h (the XLA FFI C ABI as libflashbob.so's handlers read it) against the installed
// jaxlib's xla/ffi/api/c_api.h: every field the handlers touch at XLA's offset with XLA's size,
// every constant at XLA's value. Compiled (-fsyntax-only) by test_jax_attention.py:
//   c++ -std=c++17 -fsyntax-only -I<jax.ffi.include_dir()> -I<repository> xla_ffi_abi_check.cc
#include "xla/ffi/api/c_api.h"

#include "api/XlaFfiAbi.h"

#include <cstddef>

namespace xf = flashbob::xla_ffi;

static_assert(XLA_FFI_API_MAJOR == xf::kApiMajor && XLA_FFI_API_MINOR >= xf::kApiMinor,
              "jaxlib's XLA FFI C API is not one api/XlaFfiAbi.h follows");

#define SAME_FIELD(ours, theirs, our_field, their_field)                                        \
  static_assert(offsetof(xf::ours, our_field) == offsetof(theirs, their_field) &&               \
                    sizeof(xf::ours::our_field) == sizeof(theirs::their_field),                 \
                #ours "::" #our_field " is not " #theirs "::" #their_field)

SAME_FIELD(ExtensionBase, XLA_FFI_Extension_Base, structSize, struct_size);
SAME_FIELD(ExtensionBase, XLA_FFI_Extension_Base, type, type);
SAME_FIELD(ExtensionBase, XLA_FFI_Extension_Base, next, next);

SAME_FIELD(ApiVersion, XLA_FFI_Api_Version, structSize, struct_size);
SAME_FIELD(ApiVersion, XLA_FFI_Api_Version, extensionStart, extension_start);
SAME_FIELD(ApiVersion, XLA_FFI_Api_Version, major, major_version);
SAME_FIELD(ApiVersion, XLA_FFI_Api_Version, minor, minor_version);

SAME_FIELD(ErrorCreateArgs, XLA_FFI_Error_Create_Args, structSize, struct_size);
SAME_FIELD(ErrorCreateArgs, XLA_FFI_Error_Create_Args, extensionStart, extension_start);
SAME_FIELD(ErrorCreateArgs, XLA_FFI_Error_Create_Args, message, message);
SAME_FIELD(ErrorCreateArgs, XLA_FFI_Error_Create_Args, code, errc);
static_assert(sizeof(xf::ErrorCreateArgs) >= XLA_FFI_Error_Create_Args_STRUCT_SIZE);

SAME_FIELD(StreamGetArgs, XLA_FFI_Stream_Get_Args, structSize, struct_size);
SAME_FIELD(StreamGetArgs, XLA_FFI_Stream_Get_Args, extensionStart, extension_start);
SAME_FIELD(StreamGetArgs, XLA_FFI_Stream_Get_Args, context, ctx);
SAME_FIELD(StreamGetArgs, XLA_FFI_Stream_Get_Args, stream, stream);
static_assert(sizeof(xf::StreamGetArgs) >= XLA_FFI_Stream_Get_Args_STRUCT_SIZE);

SAME_FIELD(Api, XLA_FFI_Api, structSize, struct_size);
SAME_FIELD(Api, XLA_FFI_Api, extensionStart, extension_start);
SAME_FIELD(Api, XLA_FFI_Api, version, api_version);
SAME_FIELD(Api, XLA_FFI_Api, internalApi, internal_api);
SAME_FIELD(Api, XLA_FFI_Api, errorCreate, XLA_FFI_Error_Create);
SAME_FIELD(Api, XLA_FFI_Api, streamGet, XLA_FFI_Stream_Get);

SAME_FIELD(Buffer, XLA_FFI_Buffer, structSize, struct_size);
SAME_FIELD(Buffer, XLA_FFI_Buffer, extensionStart, extension_start);
SAME_FIELD(Buffer, XLA_FFI_Buffer, dtype, dtype);
SAME_FIELD(Buffer, XLA_FFI_Buffer, data, data);
SAME_FIELD(Buffer, XLA_FFI_Buffer, rank, rank);
SAME_FIELD(Buffer, XLA_FFI_Buffer, dims, dims);

SAME_FIELD(ByteSpan, XLA_FFI_ByteSpan, ptr, ptr);
SAME_FIELD(ByteSpan, XLA_FFI_ByteSpan, length, len);
SAME_FIELD(Scalar, XLA_FFI_Scalar, dtype, dtype);
SAME_FIELD(Scalar, XLA_FFI_Scalar, value, value);

SAME_FIELD(Args, XLA_FFI_Args, structSize, struct_size);
SAME_FIELD(Args, XLA_FFI_Args, size, size);
SAME_FIELD(Args, XLA_FFI_Args, types, types);
SAME_FIELD(Args, XLA_FFI_Args, args, args);
SAME_FIELD(Rets, XLA_FFI_Rets, structSize, struct_size);
SAME_FIELD(Rets, XLA_FFI_Rets, size, size);
SAME_FIELD(Rets, XLA_FFI_Rets, types, types);
SAME_FIELD(Rets, XLA_FFI_Rets, rets, rets);
SAME_FIELD(Attrs, XLA_FFI_Attrs, structSize, struct_size);
SAME_FIELD(Attrs, XLA_FFI_Attrs, size, size);
SAME_FIELD(Attrs, XLA_FFI_Attrs, types, types);
SAME_FIELD(Attrs, XLA_FFI_Attrs, names, names);
SAME_FIELD(Attrs, XLA_FFI_Attrs, attrs, attrs);

SAME_FIELD(CallFrame, XLA_FFI_CallFrame, structSize, struct_size);
SAME_FIELD(CallFrame, XLA_FFI_CallFrame, extensionStart, extension_start);
SAME_FIELD(CallFrame, XLA_FFI_CallFrame, api, api);
SAME_FIELD(CallFrame, XLA_FFI_CallFrame, context, ctx);
SAME_FIELD(CallFrame, XLA_FFI_CallFrame, stage, stage);
SAME_FIELD(CallFrame, XLA_FFI_CallFrame, args, args);
SAME_FIELD(CallFrame, XLA_FFI_CallFrame, rets, rets);
SAME_FIELD(CallFrame, XLA_FFI_CallFrame, attrs, attrs);

SAME_FIELD(Metadata, XLA_FFI_Metadata, structSize, struct_size);
SAME_FIELD(Metadata, XLA_FFI_Metadata, version, api_version);
SAME_FIELD(Metadata, XLA_FFI_Metadata, traits, traits);
SAME_FIELD(MetadataExtension, XLA_FFI_Metadata_Extension, base, extension_base);
SAME_FIELD(MetadataExtension, XLA_FFI_Metadata_Extension, metadata, metadata);
#undef SAME_FIELD

#define SAME_VALUE(ours, theirs) \
  static_assert(static_cast<long>(ours) == static_cast<long>(theirs), #ours " is not " #theirs)
SAME_VALUE(xf::kMetadataExtension, XLA_FFI_Extension_Metadata);
SAME_VALUE(xf::kInvalidArgument, XLA_FFI_Error_Code_INVALID_ARGUMENT);
SAME_VALUE(xf::kFailedPrecondition, XLA_FFI_Error_Code_FAILED_PRECONDITION);
SAME_VALUE(xf::kInternal, XLA_FFI_Error_Code_INTERNAL);
SAME_VALUE(xf::kS32, XLA_FFI_DataType_S32);
SAME_VALUE(xf::kS64, XLA_FFI_DataType_S64);
SAME_VALUE(xf::kF16, XLA_FFI_DataType_F16);
SAME_VALUE(xf::kF32, XLA_FFI_DataType_F32);
SAME_VALUE(xf::kF64, XLA_FFI_DataType_F64);
SAME_VALUE(xf::kBF16, XLA_FFI_DataType_BF16);
SAME_VALUE(xf::kBufferArg, XLA_FFI_ArgType_BUFFER);
SAME_VALUE(xf::kBufferRet, XLA_FFI_RetType_BUFFER);
SAME_VALUE(xf::kScalarAttr, XLA_FFI_AttrType_SCALAR);
SAME_VALUE(xf::kExecuteStage, XLA_FFI_ExecutionStage_EXECUTE);
#undef SAME_VALUE

// The handlers' type is XLA's handler type.
static_assert(sizeof(xf::Handler *) == sizeof(XLA_FFI_Handler *));
