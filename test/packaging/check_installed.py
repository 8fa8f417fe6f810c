"""Run by wheel-test.sh with only the installed wheel on PYTHONPATH and no FLASHBOB_* or
LD_LIBRARY_PATH variables: the package loads the library inside itself, reports the wheel's
version, and says clearly what is missing (the GPU driver here; the library in a copy of the
package without it).

    check_installed.py SITE_DIR VERSION
"""

import ctypes
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

site, version = Path(sys.argv[1]).resolve(), sys.argv[2]
assert not [v for v in os.environ if v.startswith("FLASHBOB_") or v == "LD_LIBRARY_PATH"], os.environ

import flashbob  # noqa: E402
from flashbob import _capi  # noqa: E402

package = site / "flashbob"
assert Path(flashbob.__file__).resolve().parent == package, flashbob.__file__
assert flashbob.version() == version == importlib.metadata.version("flashbob"), (
    flashbob.version(), version, importlib.metadata.version("flashbob"))
library = package / "libflashbob.so"
assert Path(flashbob.library_path()) == library, flashbob.library_path()
mapped = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
          if "libflashbob" in line}
assert mapped == {str(library)}, mapped

# A call that needs the GPU: NoDriverError, saying so. Where a driver is present, the check is
# made with one that does not exist (read when the driver is first needed, i.e. now).
try:
    ctypes.CDLL("libcuda.so.1")
    os.environ["FLASHBOB_CUDA_DRIVER"] = "/nonexistent/libcuda.so.1"
    print("a CUDA driver is installed here: checking the no-driver error with a missing one")
except OSError:
    pass
problem = _capi.Problem(1, 1, 128, 128, 64, _capi.BF16, 0, 0.0)
# The library's limits, and a problem checked against them, with no GPU (what a front end asks
# instead of restating them).
multiple = _capi.limit(_capi.LIMIT_HEAD_DIM_MULTIPLE)
assert _capi.limit(_capi.LIMIT_HEAD_DIM_MAX) >= multiple > 0
_capi.check_problem(problem)
too_wide = _capi.Problem(1, 1, 128, 128, _capi.limit(_capi.LIMIT_HEAD_DIM_MAX) + multiple,
                         _capi.BF16, 0, 0.0)
try:
    _capi.check_problem(too_wide)
    raise AssertionError("check_problem accepted a head_dim above the limit")
except ValueError as e:
    assert "head_dim" in str(e), e
assert Path(_capi.cache_dir()).is_absolute(), _capi.cache_dir()
try:
    _capi.precompile(problem, _capi.OP_FORWARD)
    raise AssertionError("precompile without a CUDA driver succeeded")
except flashbob.NoDriverError as e:
    message = str(e)
assert "needs an NVIDIA GPU" in message and "no CUDA driver found" in message, message
# The same through precompile_ops (several operations, one call), and its bad op named first.
try:
    _capi.precompile_ops(problem, [_capi.OP_FORWARD, _capi.OP_BOB])
    raise AssertionError("precompile_ops without a CUDA driver succeeded")
except flashbob.NoDriverError as e:
    assert "no CUDA driver found" in str(e), e
try:
    _capi.precompile_ops(problem, [_capi.OP_FORWARD, 9])
    raise AssertionError("precompile_ops accepted op 9")
except ValueError as e:  # an invalid argument, refused before the driver is looked for
    assert "ops[1]" in str(e), e

# The package without its library: importing works, a call names where it looked.
with tempfile.TemporaryDirectory() as bare:
    shutil.copytree(package, Path(bare) / "flashbob", ignore=shutil.ignore_patterns("*.so"))
    probe = ("import flashbob\n"
             "try:\n    flashbob.version()\nexcept flashbob.FlashBobError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": bare},
                         capture_output=True, text=True, check=True).stdout
    missing = str(Path(bare).resolve() / "flashbob" / "libflashbob.so")
    assert "libflashbob.so not found" in out and missing in out, out

print(f"ok: flashbob {version} from {library}; without a driver: {message}")
