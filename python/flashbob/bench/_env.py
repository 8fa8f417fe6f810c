"""What the header says about the machine and the build that needs no torch: the FlashBoB
commit, the driver version, and whether this Python's torch can run the benchmark."""

import ctypes
import re
import subprocess
from pathlib import Path

# flashbob.torch needs torch.library.custom_op (torch 2.4).
TORCH_FLOOR = (2, 4)
# Written into the package by setup.py when the wheel is built from a git checkout.
BUILD_COMMIT_FILE = "BUILD_COMMIT"


def version_tuple(text):
    """(major, minor) of a version string such as "2.4.1+cu124" or "1.13.0a0" (None if none)."""
    m = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def torch_problem():
    """None when torch can run the benchmark, else why not (one line)."""
    try:
        import torch
    except ImportError as e:
        return f"needs torch >= {TORCH_FLOOR[0]}.{TORCH_FLOOR[1]} with CUDA: {e}"
    found = version_tuple(torch.__version__)
    if found is None or found < TORCH_FLOOR:
        return (f"needs torch >= {TORCH_FLOOR[0]}.{TORCH_FLOOR[1]} (flashbob.torch uses "
                f"torch.library.custom_op); this Python has torch {torch.__version__}")
    if not torch.cuda.is_available():
        return f"needs a CUDA GPU: torch {torch.__version__} sees none"
    return None


def _git(directory, *args):
    try:
        p = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def find_commit(package_dir, given=None):
    """The commit to name: the one given, else the one setup.py wrote into the package, else the
    git checkout's the package sits in (with "+local changes" when tracked files differ), else
    None."""
    if given:
        return given
    recorded = Path(package_dir) / BUILD_COMMIT_FILE
    try:
        text = recorded.read_text().strip()
        if text:
            return text
    except OSError:
        pass
    top = _git(package_dir, "rev-parse", "--show-toplevel")
    if not top:
        return None
    rev = _git(package_dir, "rev-parse", "--short", "HEAD")
    if rev and _git(top, "status", "--porcelain", "--untracked-files=no"):
        rev += "+local changes"
    return rev


def driver_version(index=0):
    """The NVIDIA driver's version (nvidia-smi), else the CUDA driver API's (libcuda), else
    "unknown"."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader",
                            "-i", str(index)], capture_output=True, text=True, timeout=20)
        line = p.stdout.strip().splitlines()[0].strip() if p.returncode == 0 and p.stdout.strip() else ""
        if line:
            return line
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
            return f"with CUDA {version.value // 1000}.{(version.value % 1000) // 10} (libcuda)"
    except OSError:
        pass
    return "unknown"
