"""ctypes binding of the C API (api/flashbob.h) in libflashbob.so.

The library is found through $FLASHBOB_LIBRARY, next to this package, or in the repository's
build/lib. Nothing here depends on torch.
"""

import ctypes
import logging
import os
from pathlib import Path

OK, INVALID_ARGUMENT, NO_DRIVER, COMPILE, CUDA, UNSUPPORTED_DEVICE = 0, 1, 2, 3, 4, 5
BF16, FP16 = 0, 1
OP_FORWARD, OP_BACKWARD, OP_BOB, OP_FORWARD_JVP = 0, 1, 2, 3


class FlashBobError(RuntimeError):
    """A FlashBoB failure that is not an invalid argument (compile, driver, no GPU, a GPU the
    kernels do not support)."""


class Problem(ctypes.Structure):
    _fields_ = [
        ("batch", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("seq_q", ctypes.c_int64),
        ("seq_k", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("causal", ctypes.c_int),
        ("scale", ctypes.c_double),
    ]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride", ctypes.c_int64 * 4)]


# The library's messages (compiling, the kernel cache, autotuning, warnings) go to Python's
# logging under the "flashbob" logger: INFO for each kernel compiled ("compiling bob_q (1/2):
# <kernel>") and for autotuning, DEBUG for cache events and each autotuning candidate, WARNING
# and ERROR as they are. Unconfigured, logging shows WARNING and above.
_LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}
logger = logging.getLogger("flashbob")


@_LogCallback
def _on_log(level, message, _user_data):
    logger.log(_LEVELS.get(level, logging.ERROR), message.decode(errors="replace"))


def _candidates():
    env = os.environ.get("FLASHBOB_LIBRARY")
    if env:
        yield Path(env)
    here = Path(__file__).resolve().parent
    yield here / "libflashbob.so"
    yield here.parent.parent / "build" / "lib" / "libflashbob.so"


def _load():
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.exists():
            lib = ctypes.CDLL(str(path))
            break
    else:
        raise ImportError("libflashbob.so not found (set FLASHBOB_LIBRARY); tried: " + ", ".join(tried))
    lib.flashbob_version.restype = ctypes.c_char_p
    lib.flashbob_last_error.restype = ctypes.c_char_p
    T, P, F, V = Tensor, ctypes.POINTER(Problem), ctypes.c_void_p, ctypes.c_void_p
    lib.flashbob_forward.argtypes = [P, T, T, T, T, F, V]
    lib.flashbob_backward.argtypes = [P, T, T, T, T, T, F, T, T, T, F, V]
    lib.flashbob_bob.argtypes = [P, T, T, T, T, T, F, T, T, T, T, T, T, T, F, V]
    lib.flashbob_forward_jvp.argtypes = [P, T, T, T, T, F, T, T, T, T, V]
    lib.flashbob_precompile.argtypes = [P, ctypes.c_int]
    for fn in (lib.flashbob_forward, lib.flashbob_backward, lib.flashbob_bob,
               lib.flashbob_forward_jvp, lib.flashbob_precompile):
        fn.restype = ctypes.c_int
    lib.flashbob_set_log_callback.argtypes = [_LogCallback, ctypes.c_void_p]
    lib.flashbob_set_log_callback.restype = None
    return lib


_lib = _load()
_lib.flashbob_set_log_callback(_on_log, None)


def version():
    return _lib.flashbob_version().decode()


def check(status):
    """Raises the Python exception for a non-OK status, with the library's message."""
    if status == OK:
        return
    message = _lib.flashbob_last_error().decode()
    if status == INVALID_ARGUMENT:
        raise ValueError(message)
    raise FlashBobError(message)


def forward(problem, q, k, v, o, lse, stream):
    check(_lib.flashbob_forward(ctypes.byref(problem), q, k, v, o, lse, stream))


def backward(problem, q, k, v, o, do, lse, dq, dk, dv, workspace, stream):
    check(_lib.flashbob_backward(ctypes.byref(problem), q, k, v, o, do, lse, dq, dk, dv, workspace, stream))


def bob(problem, q, k, v, o, do, lse, uq, uk, uv, gq, gk, gv, gdo, workspace, stream):
    check(_lib.flashbob_bob(ctypes.byref(problem), q, k, v, o, do, lse, uq, uk, uv, gq, gk, gv, gdo,
                            workspace, stream))


def forward_jvp(problem, q, k, v, o, lse, tq, tk, tv, to, stream):
    check(_lib.flashbob_forward_jvp(ctypes.byref(problem), q, k, v, o, lse, tq, tk, tv, to, stream))


def precompile(problem, op):
    check(_lib.flashbob_precompile(ctypes.byref(problem), op))
