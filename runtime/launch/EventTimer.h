// Device time of work enqueued from the host: CUDA events recorded around it on one stream.
// Shared by the autotuner (api/Tuning), `flashbob run` and `flashbob bench`.
#pragma once

#include "runtime/driver/CudaDriver.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace flashbob::runtime {

class EventTimer {
public:
  // Creates the two events (in the current context).
  static llvm::Expected<EventTimer> create(CudaDriver &driver);
  EventTimer(EventTimer &&other);
  EventTimer &operator=(EventTimer &&) = delete;
  ~EventTimer();

  // Milliseconds between an event recorded on `stream` before `work` (which enqueues on that
  // stream) and one after it; waits for the second. Errors name the driver call.
  llvm::Expected<double> time(CUstream stream, llvm::function_ref<llvm::Error()> work);

private:
  explicit EventTimer(CudaDriver &driver) : driver_(driver) {}
  CudaDriver &driver_;
  CUevent start_ = nullptr, stop_ = nullptr;
};

} // namespace flashbob::runtime
