#!/usr/bin/env bash
# The wheel as a user gets it: built from this build tree (which it must not relink: the wheel
# carries the library the other tests ran), installed with pip into an empty directory without
# network, then imported from there with no FLASHBOB_* or LD_LIBRARY_PATH set
# (check_installed.py). Also: the tag states the library's real glibc floor, the wheel stays
# under 40 MB, carries the license files and every module of the package, and the installed
# library links no LLVM/MLIR or their dependencies.
#   wheel-test.sh SOURCE_DIR BUILD_DIR PYTHON   (PYTHON with pip, setuptools and wheel)
set -euo pipefail
root=$1 build=$2 py=$3
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip=("$py" -m pip --quiet --no-cache-dir --disable-pip-version-check)

lib=$build/lib/libflashbob.so
stamp=$(stat -c %.9Y "$lib")
FLASHBOB_BUILD_DIR=$build "${pip[@]}" wheel --no-build-isolation --no-deps --no-index \
  -w "$tmp/dist" "$root"
[ "$(stat -c %.9Y "$lib")" = "$stamp" ] || fail "building the wheel relinked $lib (build first)"
wheels=("$tmp"/dist/*.whl)
((${#wheels[@]} == 1)) || fail "expected one wheel, got: ${wheels[*]}"
whl=${wheels[0]}
size=$(stat -c %s "$whl")
((size < 40000000)) || fail "$(basename "$whl") is $size bytes, over 40 MB"

"${pip[@]}" install --root-user-action=ignore --no-index --no-deps --target "$tmp/site" "$whl"
installed=$tmp/site/flashbob/libflashbob.so
strip -o "$tmp/stripped.so" "$lib"
cmp -s "$tmp/stripped.so" "$installed" || fail "the wheel's library is not this build's, stripped"
if deps=$(ldd "$installed" | grep -E 'libMLIR|libLLVM|libz3|libicu|libxml2|libedit|not found'); then
  fail "the installed library loads: $deps"
fi

# The package's sources in the wheel are the checkout's, no more, no less: every module and the
# FFI shim's source (flashbob.jax compiles it on first use, from beside jax/_ffi.py), so that a
# subpackage missing from pyproject.toml's packages, or a file from its package-data, fails here
# and not at a user's import; and nothing else, such as a module since deleted or moved left
# behind in setuptools' build directory.
sources() {
  (cd "$1" && find . -path '*/__pycache__' -prune -o -type f \( -name '*.py' -o -name '*.cc' \) \
     -printf '%P\n' | sort)
}
wheel_sources=$(sources "$tmp/site/flashbob")
checkout_sources=$(sources "$root/python/flashbob")
[ "$wheel_sources" = "$checkout_sources" ] ||
  fail "the wheel's flashbob/ sources differ from python/flashbob (pyproject.toml, setup.py):
$(diff <(echo "$checkout_sources") <(echo "$wheel_sources") | grep '^[<>]')"

# The tag: py3-none-manylinux_2_NN_x86_64, NN the newest GLIBC_2.NN the library references.
floor=$(objdump -T "$installed" | grep -o 'GLIBC_2\.[0-9]*' | cut -d. -f2 | sort -n | tail -1)
version=$(cat "$root/VERSION")
expected="flashbob-$version-py3-none-manylinux_2_${floor}_x86_64.whl"
[ "$(basename "$whl")" = "$expected" ] || fail "wheel $(basename "$whl"), expected $expected"

# The licenses travel with it: FlashBoB's and the notices of what libflashbob.so links in, and
# the metadata names the license.
info=$tmp/site/flashbob-$version.dist-info
for f in LICENSE THIRD_PARTY_NOTICES.txt; do
  cmp -s "$root/$f" "$info/$f" || fail "the wheel's $f is missing or not the checkout's"
done
grep -qx 'License: Apache-2.0' "$info/METADATA" || fail "METADATA has no 'License: Apache-2.0'"

env -i PATH=/usr/bin:/bin HOME="$tmp" PYTHONPATH="$tmp/site" \
  "$py" "$(dirname "$0")/check_installed.py" "$tmp/site" "$version"

# The command-line tool: the `flashbob` script the wheel installs and `python -m flashbob`, both
# running the library's own copy of the tool (one LLVM in the wheel: no second binary).
tool=$tmp/site/bin/flashbob
[ -f "$tool" ] || fail "the wheel installed no flashbob command"
file "$tool" | grep -q text || fail "the flashbob command is not a script: $(file "$tool")"
elves=$(find "$tmp/site" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
[ "$elves" = "$installed" ] || fail "binaries in the wheel besides libflashbob.so: $elves"
run_tool() { env -i PATH=/usr/bin:/bin HOME="$tmp" PYTHONPATH="$tmp/site" "$@"; }
out=$(run_tool "$py" "$tool" --version) || fail "flashbob --version failed: $out"
[[ $out == *"flashbob $version"* ]] || fail "flashbob --version said: $out"
out=$(run_tool "$py" -m flashbob --help) || fail "python -m flashbob --help failed: $out"
for command in env devices cache compile run bench demo; do
  [[ $out == *"$command"* ]] || fail "python -m flashbob --help does not list $command: $out"
done
out=$(run_tool FLASHBOB_CACHE_DIR="$tmp/cache" "$py" "$tool" env 2>&1) || fail "flashbob env failed: $out"
[[ $out == *"$tmp/cache"* ]] || fail "flashbob env does not show the cache directory it was given: $out"
# The tool prints the library's messages itself, on stderr, as the C++ tool does: not through
# Python's logging, which would hide INFO (`tune` names the autotuner's pick). The fake CUDA
# driver of the tests stands in for a GPU.
fake=$build/lib/libfake_cuda.so
[ -f "$fake" ] || fail "no $fake: build the fake_cuda target first"
out=$(run_tool FLASHBOB_CACHE_DIR="$tmp/cache" FLASHBOB_CUDA_DRIVER="$fake" "$py" "$tool" tune \
        --op fwd --head-dim 64 --seq 256 --iters 2 --progress none 2>&1) ||
  fail "flashbob tune on the fake driver failed: $out"
[[ $out == *"flashbob autotune: "*": chose "* ]] ||
  fail "flashbob tune did not print the autotuner's pick: $out"
# The benchmark against PyTorch (flashbob/bench, pure Python until it runs): its help without
# torch or a GPU, as `python -m flashbob.bench` and through the command's `bench --compare`.
out=$(run_tool "$py" -m flashbob.bench --help) || fail "python -m flashbob.bench --help failed: $out"
[[ $out == *"--quick"* && $out == *"--csv"* ]] || fail "python -m flashbob.bench --help said: $out"
out=$(run_tool "$py" "$tool" bench --compare --help) || fail "flashbob bench --compare --help failed: $out"
[[ $out == "usage: flashbob bench --compare"* ]] || fail "flashbob bench --compare --help said: $out"
# The commit the wheel was built from, which the benchmark's header names.
if rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null); then
  recorded=$(cat "$tmp/site/flashbob/BUILD_COMMIT" 2>/dev/null) || fail "the wheel records no BUILD_COMMIT"
  [[ $recorded == "$rev"* ]] || fail "the wheel's BUILD_COMMIT is '$recorded', the checkout is at $rev"
fi
status=0
out=$(run_tool "$py" "$tool" --no-such-flag 2>&1) || status=$?
((status == 2)) || fail "flashbob --no-such-flag exited $status, not 2 (usage): $out"
echo "ok: $(basename "$whl"), $size bytes"
