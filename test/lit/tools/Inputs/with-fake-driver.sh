# Runs "$@" with the fake CUDA driver of this build (test/fake_driver: an sm_90 device whose
# launches are logged, not run) and, unless the caller chose one, the cache directory
# fake_driver_test compiles into, so kernels compile once per build tree.
bin=$(dirname "$(command -v flashbob)")
export FLASHBOB_CUDA_DRIVER="$bin/../lib/libfake_cuda.so"
export FLASHBOB_CACHE_DIR="${FLASHBOB_CACHE_DIR:-$bin/../test/fake-driver-cache}"
exec "$@"
