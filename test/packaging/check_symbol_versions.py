"""libflashbob.so needs no symbol version newer than the wheel's floor allows (scripts/manylinux.py:
FLOOR for glibc, LIMITS for the C++ runtime): fails naming each version above it and the symbols
that need it, so a workaround in api/glibc/ can be written for them.

    check_symbol_versions.py <source root> path/to/libflashbob.so
"""

import platform
import sys
from pathlib import Path

root, library = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(root / "scripts"))
import manylinux  # noqa: E402  (found through the source root given)

needed = manylinux.needed_versions(library)
floor = "manylinux_{}_{}".format(*manylinux.FLOOR)
failures = []
for name, symbols in sorted(needed.items()):
    prefix = name.split("_", 1)[0]
    version = manylinux.version_tuple(name)
    limit = manylinux.LIMITS.get(prefix)
    if name in manylinux.ALLOWED_NAMES:
        continue
    if limit is None or version is None:
        why = f"not a version {floor} allows"
    elif version > limit:
        why = "newer than {} allows ({}_{})".format(floor, prefix, ".".join(map(str, limit)))
    else:
        continue
    failures.append(f"{name}: {why}; needed by {', '.join(sorted(symbols)) or '(no symbol)'}")

# The tag setup.py gives the wheel must be one that the floor's systems install.
tag = manylinux.platform_tag(library, platform.machine())
tag_glibc = tuple(int(p) for p in tag.split("_")[1:3])
if tag_glibc > manylinux.FLOOR:
    failures.append(f"the wheel would be tagged {tag}, above {floor}")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"ok: {library} needs {len(needed)} symbol versions, none above {floor}; "
      f"the wheel is tagged {tag}")
