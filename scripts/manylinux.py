"""The wheel's manylinux floor, in one place: setup.py tags the wheel from it and the built
library, and the libflashbob_manylinux test (test/packaging/check_symbol_versions.py) fails when
the library needs a symbol version newer than it allows.

    python3 scripts/manylinux.py path/to/libflashbob.so    # prints the tag the wheel gets
"""

import re
import subprocess
import sys

# The oldest glibc the wheel loads on: manylinux_2_28 (AlmaLinux 8, Debian 10, Ubuntu 18.10 and
# later), as PyTorch and Triton ship. libflashbob.so meets it through api/glibc/.
FLOOR = (2, 28)

# The newest symbol version of each runtime library that manylinux_2_28 allows on x86-64 (PEP 600,
# as auditwheel's policy lists it): glibc's, and the C++ runtime's (libstdc++: GLIBCXX, CXXABI;
# libgcc_s: GCC), which libflashbob.so links statically and so should not need at all.
LIMITS = {"GLIBC": FLOOR, "GLIBCXX": (3, 4, 24), "CXXABI": (1, 3, 11), "GCC": (7, 0, 0)}
# Version names without a number that the policy allows as well.
ALLOWED_NAMES = {"CXXABI_TM_1", "CXXABI_FLOAT128"}


def version_tuple(name):
    """(2, 2, 5) for "GLIBC_2.2.5"; None for a name without a version number."""
    m = re.fullmatch(r"[A-Z]+_(\d+(?:\.\d+)*)", name)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def needed_versions(library):
    """{version name: [symbols]} for every symbol version the library needs: the names of the
    version-needs section (what the loader checks before running anything, readelf -V), each with
    the undefined dynamic symbols bound to it (objdump -T)."""
    readelf = subprocess.run(["readelf", "-V", "--wide", str(library)], check=True,
                             capture_output=True, text=True).stdout
    needs = readelf.split("Version needs section", 1)
    names = re.findall(r"Name: (\S+)\s+Flags", needs[1]) if len(needs) == 2 else []
    if not names:
        raise RuntimeError(f"readelf -V {library} lists no needed symbol versions")
    found = {name: [] for name in names}
    objdump = subprocess.run(["objdump", "-T", str(library)], check=True, capture_output=True,
                             text=True).stdout
    for version, symbol in re.findall(r"\*UND\*\s+\S+\s+\(?([A-Z]+_[\w.]+)\)?\s+(\S+)$", objdump,
                                      re.MULTILINE):
        found.setdefault(version, []).append(symbol)
    return found


def glibc_needed(needed):
    """The newest GLIBC_ version among needed_versions()."""
    glibc = [version_tuple(n) for n in needed if n.startswith("GLIBC_") and version_tuple(n)]
    if not glibc:
        raise RuntimeError("the library needs no GLIBC_ version: readelf's output was misread")
    return max(glibc)


def platform_tag(library, machine):
    """manylinux_2_NN_<machine>, 2.NN the newest glibc version the library needs. LIMITS for the
    C++ runtime are manylinux_2_28's (and 2_27's, which allows the same): a library that needs any
    C++ runtime version is tagged no lower than FLOOR, where they are known to hold."""
    needed = needed_versions(library)
    glibc = glibc_needed(needed)
    if any(n.split("_", 1)[0] in ("GLIBCXX", "CXXABI", "GCC") for n in needed):
        glibc = max(glibc, FLOOR)
    return f"manylinux_{glibc[0]}_{glibc[1]}_{machine}"


if __name__ == "__main__":
    import platform
    print(platform_tag(sys.argv[1], platform.machine()))
