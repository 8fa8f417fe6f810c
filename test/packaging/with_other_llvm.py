"""libflashbob.so in a process that already has another LLVM and MLIR (as torch with triton has):
libLLVM.so and libMLIR.so of the same version are loaded first, with their symbols global, then
libflashbob.so compiles a kernel through the fake CUDA driver. If any of its LLVM symbols were
exported, its command-line options would land in the other LLVM's registry and loading would
abort ("Option ... registered more than once"), or its calls would run the other copy's code.

    FLASHBOB_LIBRARY=... FLASHBOB_CUDA_DRIVER=.../libfake_cuda.so python3 with_other_llvm.py LLVM_LIB_DIR
"""

import ctypes
import os
import sys
import tempfile
from pathlib import Path

llvm_lib_dir = Path(sys.argv[1])
for name in ("libLLVM.so", "libMLIR.so"):
    ctypes.CDLL(str(llvm_lib_dir / name), mode=os.RTLD_NOW | os.RTLD_GLOBAL)

import flashbob  # noqa: E402
from flashbob import _capi  # noqa: E402

with tempfile.TemporaryDirectory() as cache:
    os.environ["FLASHBOB_CACHE_DIR"] = cache  # empty: the kernel is compiled, not loaded
    problem = _capi.Problem(1, 2, 128, 128, 64, _capi.BF16, 1, 0.0)
    _capi.precompile(problem, _capi.OP_FORWARD)
    kernels = list(Path(cache).rglob("*.ptx"))
    assert len(kernels) == 1, f"expected one compiled kernel in the cache, found {kernels}"
    ptx = kernels[0].read_text()
    assert ".entry" in ptx and ".target sm_90a" in ptx, ptx[:400]

print(f"ok: {flashbob.library_path()} compiled a forward kernel next to {llvm_lib_dir}/libLLVM.so")
