// The C API's status for each error kind, shared by CApi.cpp and its unit test.
#pragma once

#include "api/flashbob.h"
#include "support/Errors.h"

namespace flashbob::api {

// InvalidArgument, NoDriver, CudaCall and UnsupportedDevice map to their statuses; Compile and every error
// without a kind (the compiler's) to FLASHBOB_ERROR_COMPILE.
flashbob_status statusFor(support::ErrorKind kind);

} // namespace flashbob::api
