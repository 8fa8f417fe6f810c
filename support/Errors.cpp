#include "support/Errors.h"

namespace flashbob::support {

char InvalidArgumentError::ID = 0;
char NoDriverError::ID = 0;
char CudaCallError::ID = 0;
char CompileError::ID = 0;
char UnsupportedDeviceError::ID = 0;

llvm::Error makeInvalidArgument(llvm::StringRef argument, const llvm::Twine &message) {
  return llvm::make_error<InvalidArgumentError>(argument.str(), message.str());
}

llvm::Error makeNoDriver(const llvm::Twine &reason) {
  return llvm::make_error<NoDriverError>(reason.str());
}

llvm::Error makeCudaCallError(llvm::StringRef call, int result, const llvm::Twine &description) {
  return llvm::make_error<CudaCallError>(call.str(), result, description.str());
}

llvm::Error makeCompileError(llvm::StringRef stage, const llvm::Twine &message) {
  return llvm::make_error<CompileError>(stage.str(), message.str());
}

llvm::Error makeUnsupportedDevice(llvm::StringRef device, const llvm::Twine &reason) {
  return llvm::make_error<UnsupportedDeviceError>(device.str(), reason.str());
}

ErrorKind kindOf(const llvm::ErrorInfoBase &payload) {
  if (payload.isA<InvalidArgumentError>())
    return ErrorKind::InvalidArgument;
  if (payload.isA<NoDriverError>())
    return ErrorKind::NoDriver;
  if (payload.isA<CudaCallError>())
    return ErrorKind::CudaCall;
  if (payload.isA<CompileError>())
    return ErrorKind::Compile;
  if (payload.isA<UnsupportedDeviceError>())
    return ErrorKind::UnsupportedDevice;
  // Older code marks argument errors by their error code only (createStringError(errc::...)).
  if (payload.convertToErrorCode() == std::errc::invalid_argument)
    return ErrorKind::InvalidArgument;
  return ErrorKind::Other;
}

ErrorReport takeErrorReport(llvm::Error error) {
  ErrorReport report{ErrorKind::Other, ""};
  bool first = true;
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase &payload) {
    ErrorKind kind = kindOf(payload);
    if (report.kind == ErrorKind::Other)
      report.kind = kind;
    report.message += (first ? "" : "\n") + payload.message();
    first = false;
  });
  return report;
}

} // namespace flashbob::support
