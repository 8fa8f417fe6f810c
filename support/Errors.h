// The kinds of failure callers act on differently, as llvm::ErrorInfo classes, so that the C API
// and the CLI pick a status or an exit code from an error's class instead of its message text.
//
// Each class prints exactly the message it was given (plus a fixed prefix where noted), so the
// one-line messages users see stay as they were. Errors without one of these classes (most of
// the compiler's) are "other"; the C API reports those as FLASHBOB_ERROR_COMPILE.
#pragma once

#include "llvm/Support/Error.h"

#include <string>

namespace flashbob::support {

// A caller's argument (or a knob's value) is unusable; nothing was run.
class InvalidArgumentError : public llvm::ErrorInfo<InvalidArgumentError> {
public:
  static char ID;
  // `argument`: the name of the bad argument ("head_dim", "--seq-q", "FLASHBOB_CACHE_MAX_MB");
  // `message`: the whole line, which names it too.
  InvalidArgumentError(std::string argument, std::string message)
      : argument_(std::move(argument)), message_(std::move(message)) {}
  const std::string &argument() const { return argument_; }
  void log(llvm::raw_ostream &os) const override { os << message_; }
  std::error_code convertToErrorCode() const override {
    return std::make_error_code(std::errc::invalid_argument);
  }

private:
  std::string argument_, message_;
};

// No CUDA driver library, or it reports no device. Prints "no CUDA driver found: <reason>".
class NoDriverError : public llvm::ErrorInfo<NoDriverError> {
public:
  static char ID;
  explicit NoDriverError(std::string reason) : reason_(std::move(reason)) {}
  const std::string &reason() const { return reason_; }
  void log(llvm::raw_ostream &os) const override { os << "no CUDA driver found: " << reason_; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  std::string reason_;
};

// A CUDA driver call returned an error. Prints "<call>: <description>", e.g.
// "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)".
class CudaCallError : public llvm::ErrorInfo<CudaCallError> {
public:
  static char ID;
  CudaCallError(std::string call, int result, std::string description)
      : call_(std::move(call)), result_(result), description_(std::move(description)) {}
  const std::string &call() const { return call_; }
  int result() const { return result_; } // the CUresult
  void log(llvm::raw_ostream &os) const override { os << call_ << ": " << description_; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  std::string call_;
  int result_;
  std::string description_;
};

// There is a GPU, but the kernels cannot run on it (below sm_80, or a compute capability no
// target is known for, e.g. sm_100). Prints "this GPU (sm_XY) is not supported: <reason>".
class UnsupportedDeviceError : public llvm::ErrorInfo<UnsupportedDeviceError> {
public:
  static char ID;
  UnsupportedDeviceError(std::string device, std::string reason)
      : device_(std::move(device)), reason_(std::move(reason)) {}
  const std::string &device() const { return device_; } // "sm_75"
  void log(llvm::raw_ostream &os) const override {
    os << "this GPU (" << device_ << ") is not supported: " << reason_;
  }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  std::string device_, reason_;
};

// Generating or assembling a kernel failed at `stage` (e.g. "ptxas"). Prints the message as is.
class CompileError : public llvm::ErrorInfo<CompileError> {
public:
  static char ID;
  CompileError(std::string stage, std::string message)
      : stage_(std::move(stage)), message_(std::move(message)) {}
  const std::string &stage() const { return stage_; }
  void log(llvm::raw_ostream &os) const override { os << message_; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  std::string stage_, message_;
};

llvm::Error makeInvalidArgument(llvm::StringRef argument, const llvm::Twine &message);
llvm::Error makeNoDriver(const llvm::Twine &reason);
llvm::Error makeCudaCallError(llvm::StringRef call, int result, const llvm::Twine &description);
llvm::Error makeCompileError(llvm::StringRef stage, const llvm::Twine &message);
llvm::Error makeUnsupportedDevice(llvm::StringRef device, const llvm::Twine &reason);

enum class ErrorKind { InvalidArgument, NoDriver, CudaCall, Compile, UnsupportedDevice, Other };

// The kind of one error payload (e.g. inside llvm::handleAllErrors).
ErrorKind kindOf(const llvm::ErrorInfoBase &payload);

// Consumes `error`: the first payload's kind that is not Other (Other for none), and the
// messages of all payloads, one per line (what llvm::toString gives).
struct ErrorReport {
  ErrorKind kind;
  std::string message;
};
ErrorReport takeErrorReport(llvm::Error error);

} // namespace flashbob::support
