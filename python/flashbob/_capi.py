"""ctypes binding of the C API (api/flashbob.h) in libflashbob.so.

The library is loaded on the first call, not at import, so `import flashbob` works anywhere and a
call says what is missing. It is $FLASHBOB_LIBRARY when set (a developer's override: it must
exist), else the copy inside this package (the wheel's), else the repository's build/lib (a
source checkout on PYTHONPATH). Nothing here depends on torch.
"""

import ctypes
import logging
import os
import struct
import threading
from pathlib import Path

OK, INVALID_ARGUMENT, NO_DRIVER, COMPILE, CUDA, UNSUPPORTED_DEVICE = 0, 1, 2, 3, 4, 5
BF16, FP16 = 0, 1
OP_FORWARD, OP_BACKWARD, OP_BOB, OP_FORWARD_JVP, OP_BOB_PASS1, OP_BOB_PASS2 = 0, 1, 2, 3, 4, 5
OP_FORWARD_DUAL = 6
LIMIT_HEAD_DIM_MULTIPLE, LIMIT_HEAD_DIM_MAX, LIMIT_SEQUENCE_MAX, LIMIT_BATCH_HEADS_MAX = 0, 1, 2, 3
LIMIT_HEAD_DIM_MIN = 4


class FlashBobError(RuntimeError):
    """A FlashBoB failure that is not an invalid argument (compile, driver, no GPU, a GPU the
    kernels do not support, libflashbob.so missing)."""


class NoDriverError(FlashBobError):
    """No CUDA driver or no GPU on this machine: the kernels cannot run here."""


class Problem(ctypes.Structure):
    """flashbob_problem. Its `size` (first, as in the header) is set here: positional arguments
    fill the fields after it, in the header's order."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("batch", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("seq_q", ctypes.c_int64),
        ("seq_k", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("causal", ctypes.c_int),
        ("scale", ctypes.c_double),
        ("heads_kv", ctypes.c_int64),
        ("sliding_window", ctypes.c_int),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("varlen", ctypes.c_int),
        ("cu_seqlens_q", ctypes.c_void_p),
        ("cu_seqlens_k", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_k", ctypes.c_int64),
        ("ring_step", ctypes.c_int),
        ("head_dim_v", ctypes.c_int64),
    ]

    def __init__(self, *fields, **named):
        super().__init__(ctypes.sizeof(Problem), *fields, **named)


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride", ctypes.c_int64 * 4)]


# C tensor structs for a call, made once per thread as views of one buffer and filled in one
# struct.pack_into per call: constructing ctypes structs costs more than the launch they carry
# (bench/results/2026-12-07-h100-host-path.md). ctypes copies a struct passed by value at the
# call, so a view may be refilled as soon as the call returns.
_TENSOR_BYTES = ctypes.sizeof(Tensor)
_MAX_TENSORS = 16  # more than any call passes (BoB: 13)
_TENSOR_FORMATS = [struct.Struct("=" + "Q4q" * count) for count in range(_MAX_TENSORS + 1)]
assert _TENSOR_FORMATS[1].size == _TENSOR_BYTES


class _Scratch(threading.local):
    def __init__(self):
        self.buffer = (ctypes.c_char * (_TENSOR_BYTES * _MAX_TENSORS))()
        self.views = tuple(Tensor.from_buffer(self.buffer, _TENSOR_BYTES * i)
                           for i in range(_MAX_TENSORS))


_scratch = _Scratch()


def tensor_structs(values, count):
    """`count` C tensor structs from `values` (each tensor's data pointer, then its 4 strides),
    as views of this thread's buffer: valid until this thread's next tensor_structs."""
    scratch = _scratch
    _TENSOR_FORMATS[count].pack_into(scratch.buffer, 0, *values)
    return scratch.views[:count]


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


# Every entry point this binding calls, with its C types spelled as api/flashbob.h declares them
# (result, parameters). The ctypes prototypes are made from this table, and a CPU test
# (test/capi/abi_mirror.py) compiles the table against the header, so a drift of either fails.
SIGNATURES = {
    "flashbob_version": ("const char *", []),
    "flashbob_last_error": ("const char *", []),
    "flashbob_set_log_callback": ("void", ["flashbob_log_callback", "void *"]),
    "flashbob_forward": ("flashbob_status", [
        "const flashbob_problem *", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "float *", "void *"]),
    "flashbob_backward": ("flashbob_status", [
        "const flashbob_problem *", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "const float *", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "float *", "void *"]),
    "flashbob_bob": ("flashbob_status", [
        "const flashbob_problem *", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "const float *", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "float *", "void *"]),
    "flashbob_forward_jvp": ("flashbob_status", [
        "const flashbob_problem *", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "const float *", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "void *"]),
    "flashbob_forward_dual": ("flashbob_status", [
        "const flashbob_problem *", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor", "float *",
        "flashbob_tensor", "void *"]),
    "flashbob_bob_pass1": ("flashbob_status", [
        "const flashbob_problem *", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "const float *", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "float *", "void *"]),
    "flashbob_bob_pass2": ("flashbob_status", [
        "const flashbob_problem *", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor",
        "flashbob_tensor", "const float *", "const float *", "flashbob_tensor",
        "flashbob_tensor", "flashbob_tensor", "flashbob_tensor", "flashbob_tensor", "void *"]),
    "flashbob_precompile": ("flashbob_status", ["const flashbob_problem *", "flashbob_op"]),
    "flashbob_precompile_ops": ("flashbob_status", [
        "const flashbob_problem *", "const flashbob_op *", "int64_t"]),
    "flashbob_limit": ("int64_t", ["flashbob_limit_kind"]),
    "flashbob_check_problem": ("flashbob_status", ["const flashbob_problem *"]),
    "flashbob_cache_dir": ("const char *", []),
    "flashbob_cli_main": ("int", ["int", "char **"]),
}

# The constants this binding names, as the header's: (Python name, C name).
CONSTANTS = [
    ("OK", "FLASHBOB_OK"), ("INVALID_ARGUMENT", "FLASHBOB_ERROR_INVALID_ARGUMENT"),
    ("NO_DRIVER", "FLASHBOB_ERROR_NO_DRIVER"), ("COMPILE", "FLASHBOB_ERROR_COMPILE"),
    ("CUDA", "FLASHBOB_ERROR_CUDA"), ("UNSUPPORTED_DEVICE", "FLASHBOB_ERROR_UNSUPPORTED_DEVICE"),
    ("BF16", "FLASHBOB_BF16"), ("FP16", "FLASHBOB_FP16"),
    ("OP_FORWARD", "FLASHBOB_OP_FORWARD"), ("OP_BACKWARD", "FLASHBOB_OP_BACKWARD"),
    ("OP_BOB", "FLASHBOB_OP_BOB"), ("OP_FORWARD_JVP", "FLASHBOB_OP_FORWARD_JVP"),
    ("OP_BOB_PASS1", "FLASHBOB_OP_BOB_PASS1"), ("OP_BOB_PASS2", "FLASHBOB_OP_BOB_PASS2"),
    ("OP_FORWARD_DUAL", "FLASHBOB_OP_FORWARD_DUAL"),
    ("LIMIT_HEAD_DIM_MULTIPLE", "FLASHBOB_LIMIT_HEAD_DIM_MULTIPLE"),
    ("LIMIT_HEAD_DIM_MAX", "FLASHBOB_LIMIT_HEAD_DIM_MAX"),
    ("LIMIT_SEQUENCE_MAX", "FLASHBOB_LIMIT_SEQUENCE_MAX"),
    ("LIMIT_BATCH_HEADS_MAX", "FLASHBOB_LIMIT_BATCH_HEADS_MAX"),
    ("LIMIT_HEAD_DIM_MIN", "FLASHBOB_LIMIT_HEAD_DIM_MIN"),
]

# The C types above as ctypes passes them. Pointers to device memory and streams are plain
# addresses (an int converts); enums are ints.
_CTYPES = {
    "void": None,
    "const char *": ctypes.c_char_p,
    "void *": ctypes.c_void_p,
    "float *": ctypes.c_void_p,
    "const float *": ctypes.c_void_p,
    "int": ctypes.c_int,
    "char **": ctypes.POINTER(ctypes.c_char_p),
    "int64_t": ctypes.c_int64,
    "flashbob_status": ctypes.c_int,
    "flashbob_op": ctypes.c_int,
    "flashbob_limit_kind": ctypes.c_int,
    "const flashbob_op *": ctypes.POINTER(ctypes.c_int),
    "const flashbob_problem *": ctypes.POINTER(Problem),
    "flashbob_tensor": Tensor,
    "flashbob_log_callback": _LogCallback,
}


def _candidates():
    env = os.environ.get("FLASHBOB_LIBRARY")
    if env:
        if not Path(env).is_file():
            raise FlashBobError(f"FLASHBOB_LIBRARY={env} is not a file (unset it to use the "
                                "library inside the flashbob package)")
        yield Path(env)
        return
    here = Path(__file__).resolve().parent
    yield here / "libflashbob.so"
    checkout = here.parent.parent
    if (checkout / "CMakeLists.txt").is_file():
        yield checkout / "build" / "lib" / "libflashbob.so"


def _load():
    tried = []
    for path in _candidates():
        if not path.is_file():
            tried.append(str(path))
            continue
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise FlashBobError(f"cannot load {path}: {e}") from None
        break
    else:
        raise FlashBobError("libflashbob.so not found: looked for " + ", ".join(tried) +
                            " (install the flashbob wheel, or set FLASHBOB_LIBRARY to a built one)")
    for name, (result, params) in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = _CTYPES[result]
        fn.argtypes = [_CTYPES[t] for t in params]
    lib.flashbob_set_log_callback(_on_log, None)
    return lib


_lib = None
_lib_lock = threading.Lock()


def log_to_stderr(lib):
    """The library's messages back on its own default (INFO and above to stderr), not the
    "flashbob" logger that loading it routed them to: for the command-line tool."""
    lib.flashbob_set_log_callback(_LogCallback(), None)  # a NULL callback


def _library():
    """The loaded library; loads it on first use (a failure raises FlashBobError, and the next
    call tries again)."""
    global _lib
    if _lib is None:
        with _lib_lock:
            if _lib is None:
                _lib = _load()
    return _lib


def library():
    """The loaded library (ctypes), for its symbols beyond the calls wrapped here (flashbob.jax
    registers its XLA FFI handlers from it)."""
    return _library()


def library_path():
    """The path of the libflashbob.so this process uses (loading it if needed)."""
    return _library()._name


def version():
    return _library().flashbob_version().decode()


def check(status):
    """Raises the Python exception for a non-OK status, with the library's message."""
    if status == OK:
        return
    message = _library().flashbob_last_error().decode()
    if status == INVALID_ARGUMENT:
        raise ValueError(message)
    if status == NO_DRIVER:
        raise NoDriverError("FlashBoB needs an NVIDIA GPU and its driver: " + message)
    raise FlashBobError(message)


def forward(problem, q, k, v, o, lse, stream):
    check(_library().flashbob_forward(ctypes.byref(problem), q, k, v, o, lse, stream))


def backward(problem, q, k, v, o, do, lse, dq, dk, dv, workspace, stream):
    check(_library().flashbob_backward(ctypes.byref(problem), q, k, v, o, do, lse, dq, dk, dv,
                                       workspace, stream))


def bob(problem, q, k, v, o, do, lse, uq, uk, uv, gq, gk, gv, gdo, workspace, stream):
    check(_library().flashbob_bob(ctypes.byref(problem), q, k, v, o, do, lse, uq, uk, uv, gq, gk,
                                  gv, gdo, workspace, stream))


def forward_jvp(problem, q, k, v, o, lse, tq, tk, tv, to, stream):
    check(_library().flashbob_forward_jvp(ctypes.byref(problem), q, k, v, o, lse, tq, tk, tv, to,
                                          stream))


def forward_dual(problem, q, k, v, tq, tk, tv, o, lse, to, stream):
    check(_library().flashbob_forward_dual(ctypes.byref(problem), q, k, v, tq, tk, tv, o, lse, to,
                                           stream))


def bob_pass1(problem, q, k, v, o, do, lse, uq, uk, uv, x1, x2, x3, x4, workspace, stream):
    check(_library().flashbob_bob_pass1(ctypes.byref(problem), q, k, v, o, do, lse, uq, uk, uv,
                                        x1, x2, x3, x4, workspace, stream))


def bob_pass2(problem, q, k, v, do, lse, row_scalars, uq, uk, uv, gk, gv, stream):
    check(_library().flashbob_bob_pass2(ctypes.byref(problem), q, k, v, do, lse, row_scalars, uq,
                                        uk, uv, gk, gv, stream))


def limit(kind):
    """The library's value of limit `kind` (LIMIT_*): what its kernels take."""
    return _library().flashbob_limit(kind)


def check_problem(problem):
    """Raises ValueError, naming the field, for a problem no call would accept (no GPU needed)."""
    check(_library().flashbob_check_problem(ctypes.byref(problem)))


def cache_dir():
    """The kernel cache's directory as the library uses it."""
    return _library().flashbob_cache_dir().decode()


def precompile(problem, op):
    check(_library().flashbob_precompile(ctypes.byref(problem), op))


def precompile_ops(problem, ops):
    """The kernels of every operation of `ops` (OP_* values), compiled at once."""
    ops = list(ops)
    if ops:
        check(_library().flashbob_precompile_ops(ctypes.byref(problem),
                                                 (ctypes.c_int * len(ops))(*ops), len(ops)))
