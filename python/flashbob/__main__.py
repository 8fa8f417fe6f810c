"""The `flashbob` command (env, devices, cache, compile, run, bench, demo): `python -m flashbob`
and the wheel's `flashbob` script. The tool lives inside libflashbob.so (flashbob_cli_main), so
it runs with the library's own LLVM and needs nothing else installed; `flashbob --help` lists
the commands. `flashbob bench --compare [options]` is the exception: it runs the comparison
against PyTorch, `python -m flashbob.bench` (flashbob/bench), here in Python, before the library
is loaded."""

import ctypes
import os
import sys

from . import _capi


def main(argv=None):
    """Runs the tool on `argv` (default: this process's arguments) and returns its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"] and "--compare" in argv[1:]:
        from .bench import main as compare
        rest = argv[1:]
        rest.remove("--compare")
        return compare(rest, prog="flashbob bench --compare")
    args = [b"flashbob"] + [os.fsencode(a) for a in argv]
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    # The tool writes to the standard streams' file descriptors: what Python buffered goes first.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        library = _capi._library()
    except _capi.FlashBobError as e:
        print(f"flashbob: {e}", file=sys.stderr)
        return 1
    # The tool's messages (the autotuner's candidates and pick) go to stderr as the C++ tool
    # prints them: Python's logging, unconfigured, would show warnings only.
    _capi.log_to_stderr(library)
    return library.flashbob_cli_main(len(args), c_argv)


if __name__ == "__main__":
    sys.exit(main())
