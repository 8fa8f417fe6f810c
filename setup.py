"""The wheel's build steps beyond pyproject.toml's metadata (docs/toolchain.md, "The wheel").

build_py starts from an empty flashbob/ in its build directory, also builds libflashbob.so (CMake
target FlashBobShared, in FLASHBOB_BUILD_DIR, default build/, configured first if it is not) and
installs it stripped into the package (the CMake install component "python"), and records the git
commit it was built from in flashbob/BUILD_COMMIT (when the source is a checkout), which
`python -m flashbob.bench` names in its header. bdist_wheel tags the wheel
py3-none-manylinux_2_NN_<arch>: the library is loaded through its C ABI with ctypes, so one wheel
serves every Python 3, and 2.NN is the newest glibc symbol version the library needs, read from
the built file (scripts/manylinux.py, which also holds the floor, manylinux_2_28, that the
libflashbob_manylinux test holds it to).
"""

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent
BUILD = Path(os.environ.get("FLASHBOB_BUILD_DIR", ROOT / "build")).resolve()
sys.path.insert(0, str(ROOT / "scripts"))
import manylinux  # noqa: E402  (scripts/manylinux.py: the tag's one home)


class BuildPyWithLibrary(build_py):
    def run(self):
        # build_py copies into the same directory every time and removes nothing: a module since
        # deleted or moved (flashbob/jax.py, now the package flashbob/jax/) would stay in every
        # later wheel built from this tree.
        shutil.rmtree(Path(self.build_lib) / "flashbob", ignore_errors=True)
        super().run()
        if not (BUILD / "CMakeCache.txt").is_file():
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(BUILD), *generator], check=True)
        subprocess.run(["cmake", "--build", str(BUILD), "--target", "FlashBobShared"], check=True)
        subprocess.run(["cmake", "--install", str(BUILD), "--component", "python", "--strip",
                        "--prefix", self.build_lib], check=True)
        self.record_commit()

    def record_commit(self):
        """The commit the wheel is built from, for the header of `python -m flashbob.bench`
        (flashbob/bench/_env.py reads it), when the source is a git checkout: "+local changes"
        when tracked files differ from it."""
        def git(*args):
            p = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
            return p.stdout.strip() if p.returncode == 0 else None
        try:
            rev = git("rev-parse", "--short", "HEAD")
            if rev and git("status", "--porcelain", "--untracked-files=no"):
                rev += "+local changes"
        except OSError:  # no git
            rev = None
        target = Path(self.build_lib) / "flashbob" / "BUILD_COMMIT"
        if rev:
            target.write_text(rev + "\n")
        elif target.exists():
            target.unlink()


class BinaryDistribution(Distribution):
    """The package carries a native library: installed as platform-specific (platlib)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        build_lib = Path(self.get_finalized_command("build_py").build_lib)
        library = build_lib / "flashbob" / "libflashbob.so"
        return "py3", "none", manylinux.platform_tag(library, platform.machine())


# setuptools' own build files go into the CMake build tree, not the default build/ of the
# checkout (which is the CMake build tree itself when FLASHBOB_BUILD_DIR is unset).
setup(distclass=BinaryDistribution,
      cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel},
      options={"build": {"build_base": str(BUILD / "python")},
               "egg_info": {"egg_base": str(BUILD / "python")}})
