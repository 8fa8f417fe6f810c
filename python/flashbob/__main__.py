"""The `flashbob` command (env, devices, cache, compile, run, bench, demo): `python -m flashbob`
and the wheel's `flashbob` script. The tool lives inside libflashbob.so (flashbob_cli_main), so
it runs with the library's own LLVM and needs nothing else installed; `flashbob --help` lists
the commands."""

import ctypes
import os
import sys

from . import _capi


def main(argv=None):
    """Runs the tool on `argv` (default: this process's arguments) and returns its exit code."""
    args = [b"flashbob"] + [os.fsencode(a) for a in (sys.argv[1:] if argv is None else argv)]
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    # The tool writes to the standard streams' file descriptors: what Python buffered goes first.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        library = _capi._library()
    except _capi.FlashBobError as e:
        print(f"flashbob: {e}", file=sys.stderr)
        return 1
    return library.flashbob_cli_main(len(args), c_argv)


if __name__ == "__main__":
    sys.exit(main())
