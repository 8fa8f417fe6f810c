"""The XLA FFI handlers, registered with XLA when a primitive is first lowered for CUDA
(_lowering; docs/jax.md, "The FFI handlers"): those built into libflashbob.so (flashbob_xla_*,
api/XlaFfi.cpp) where the installed jaxlib's FFI C API is one they follow, else the shim
(jax_ffi.cc) compiled once per source, jax and compiler into the kernel cache's directory,
loaded and pointed at libflashbob.so. FLASHBOB_JAX_FFI=prebuilt or shim forces one.
"""

import ctypes
import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import jax

from .. import _capi
from .._capi import FlashBobError


# --- registration: the library's handlers, or the shim's ---------------------------------------

_SOURCE = Path(__file__).with_name("jax_ffi.cc")
_registered = None  # "prebuilt" or "shim", once the handlers are registered
_shim = None
_lock = threading.Lock()

# The FFI C API versions the library's handlers follow (api/XlaFfiAbi.h): major 0, minor >= 1.
_PREBUILT_MAJOR, _PREBUILT_MINOR = 0, 1


def register_targets(handlers):
    """Registers flashbob's handlers with XLA, once per process. handlers: (XLA target name,
    handler symbol in jax_ffi.cc, handler symbol in libflashbob.so) triples."""
    global _registered
    with _lock:
        if _registered is not None:
            return
        choice = os.environ.get("FLASHBOB_JAX_FFI", "")
        if choice not in ("", "prebuilt", "shim"):
            raise FlashBobError(f"FLASHBOB_JAX_FFI={choice} is neither prebuilt nor shim (unset "
                                f"it to let flashbob.jax choose)")
        version = installed_ffi_version()
        if choice == "prebuilt" or (choice == "" and prebuilt_follows(version)):
            try:
                _register_prebuilt(handlers)
                _registered = "prebuilt"
                return
            except Exception as e:  # XLA refused them: the shim, built for this jaxlib
                if choice == "prebuilt":
                    raise
                _capi.logger.warning("flashbob.jax: XLA did not take the FFI handlers in "
                                     "libflashbob.so (%s): using the FFI shim", e)
        elif choice == "":
            _capi.logger.info("flashbob.jax: jaxlib's XLA FFI C API is %s, not one the handlers "
                              "in libflashbob.so follow (0.x, x >= 1): using the FFI shim",
                              "unknown" if version is None else "%d.%d" % version)
        _register_shim(handlers)
        _registered = "shim"


def registered():
    """Which handlers this process registered ("prebuilt", "shim"), or None so far."""
    return _registered


def installed_ffi_version():
    """(major, minor) of the XLA FFI C API in the installed jaxlib's header, or None where the
    header is missing or says neither."""
    header = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h"
    try:
        text = header.read_text(errors="replace")
    except OSError:
        return None
    major = re.search(r"^#define XLA_FFI_API_MAJOR (\d+)", text, re.M)
    minor = re.search(r"^#define XLA_FFI_API_MINOR (\d+)", text, re.M)
    return (int(major.group(1)), int(minor.group(1))) if major and minor else None


def prebuilt_follows(version):
    return version is not None and version[0] == _PREBUILT_MAJOR and version[1] >= _PREBUILT_MINOR


def _register_prebuilt(handlers):
    library = _capi.library()
    for target, _, symbol in handlers:
        try:
            handler = getattr(library, symbol)
        except AttributeError:
            raise FlashBobError(f"flashbob.jax: {_capi.library_path()} has no {symbol} (a library "
                                f"older than this package; FLASHBOB_JAX_FFI=shim compiles the "
                                f"handlers instead)") from None
        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler), platform="CUDA")


def _register_shim(handlers):
    global _shim
    shim = ctypes.CDLL(str(_shim_library()))
    init = shim.flashbob_jax_ffi_init
    init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    init.restype = ctypes.c_int
    message = ctypes.create_string_buffer(1024)
    # The path flashbob._capi loaded: dlopen returns that same handle (one kernel cache).
    library = os.path.abspath(_capi.library_path())
    if init(os.fsencode(library), message, len(message)) != 0:
        raise FlashBobError("flashbob.jax: " + message.value.decode(errors="replace"))
    for target, symbol, _ in handlers:
        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(shim, symbol)),
                                    platform="CUDA")
    _shim = shim


def _compiler():
    named = os.environ.get("CXX")
    command = shlex.split(named) if named else []
    for candidate in ([command[0]] if command else ["c++", "g++", "clang++"]):
        found = shutil.which(candidate)
        if found:
            return [found, *command[1:]]
    raise FlashBobError("flashbob.jax compiles its XLA FFI shim (jax_ffi.cc) on first use and "
                        "needs a C++17 compiler: " +
                        (f"CXX={named} is not found" if named else
                         "none of c++, g++, clang++ is on PATH") + " (install one or set CXX)")


def _compile_command():
    """The command without its output; every input that changes the binary is in it."""
    return [*_compiler(), "-std=c++17", "-O2", "-shared", "-fPIC", "-I" + jax.ffi.include_dir(),
            f"-DFLASHBOB_PROBLEM_SIZE={ctypes.sizeof(_capi.Problem)}",
            f"-DFLASHBOB_TENSOR_SIZE={ctypes.sizeof(_capi.Tensor)}", str(_SOURCE), "-ldl"]


def _shim_key(command):
    """The cache key: the source, the XLA FFI headers it includes, jax's version, the command."""
    digest = hashlib.sha256(_SOURCE.read_bytes())
    api = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api"
    for header in sorted(api.glob("*.h")):
        digest.update(header.read_bytes())
    digest.update("\0".join([jax.__version__, *command]).encode())
    return digest.hexdigest()[:16]


def _cache_root():
    """The kernel cache's directory as the library resolves it (flashbob_cache_dir;
    docs/cache-threat-model.md), whose jax-ffi/ holds shims."""
    return Path(_capi.cache_dir())


def _owned(path, kind):
    """Whether `path` is this user's, of `kind` (stat.S_ISDIR / S_ISREG), and writable by no one
    else: a shim is code this process runs."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return kind(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _shim_directory():
    directory = _cache_root() / "jax-ffi"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass
    if _owned(directory, stat.S_ISDIR):
        return directory
    private = Path(tempfile.mkdtemp(prefix="flashbob-jax-ffi-"))
    _capi.logger.warning("flashbob.jax: %s is not a directory only this user can write; building "
                         "the FFI shim in %s for this process", directory, private)
    return private


def _shim_library():
    """The shim's path, compiled first if no cached build matches (atomically: a temporary file
    renamed into place, so concurrent processes never load a partial one)."""
    if not _SOURCE.is_file():
        raise FlashBobError(f"flashbob.jax: {_SOURCE} is missing (the flashbob package must ship "
                            f"jax_ffi.cc, docs/jax.md)")
    command = _compile_command()
    directory = _shim_directory()
    target = directory / f"flashbob_jax_ffi-{_shim_key(command)}.so"
    if _owned(target, stat.S_ISREG):
        return target
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        _capi.logger.info("flashbob.jax: compiling the XLA FFI shim: %s", " ".join(command))
        done = subprocess.run([*command, "-o", temporary], capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).splitlines()[-30:])
            raise FlashBobError(f"flashbob.jax: compiling the XLA FFI shim failed (exit "
                                f"{done.returncode}): {' '.join(command)}\n{tail}")
        os.chmod(temporary, 0o700)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target
