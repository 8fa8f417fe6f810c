#include "runtime/launch/EventTimer.h"

namespace flashbob::runtime {

llvm::Expected<EventTimer> EventTimer::create(CudaDriver &driver) {
  EventTimer timer(driver);
  FLASHBOB_CU(driver, cuEventCreate(&timer.start_, CU_EVENT_DEFAULT));
  FLASHBOB_CU(driver, cuEventCreate(&timer.stop_, CU_EVENT_DEFAULT));
  return std::move(timer);
}

EventTimer::EventTimer(EventTimer &&other)
    : driver_(other.driver_), start_(other.start_), stop_(other.stop_) {
  other.start_ = other.stop_ = nullptr;
}

EventTimer::~EventTimer() {
  if (start_)
    driver_.api().cuEventDestroy(start_);
  if (stop_)
    driver_.api().cuEventDestroy(stop_);
}

llvm::Expected<double> EventTimer::time(CUstream stream, llvm::function_ref<llvm::Error()> work) {
  FLASHBOB_CU(driver_, cuEventRecord(start_, stream));
  if (llvm::Error e = work())
    return std::move(e);
  FLASHBOB_CU(driver_, cuEventRecord(stop_, stream));
  FLASHBOB_CU(driver_, cuEventSynchronize(stop_));
  float ms = 0;
  FLASHBOB_CU(driver_, cuEventElapsedTime(&ms, start_, stop_));
  return static_cast<double>(ms);
}

} // namespace flashbob::runtime
