#!/usr/bin/env bash
# GPU machine: the performance table in ONE device call of at most 10 minutes.
# `flashbob bench --json --check` over batch 1, 16 heads, d = 64 and 128, causal and not,
# N = M = 1K, 2K, ..., 128K, ops fwd, bwd, bob; then PyTorch on the same shapes (exact BoB by
# eager double backward, SDPA cuDNN and flash forward/backward), PyTorch's bf16 matmul ceiling, one
# torch.compile probe; Nsight Compute on each of our kernels at 16K (kernel-profile.sh); then
# the markdown table (bench/compare_torch.py does the work), with its targets and the
# GPU's clock and power during the calls they are judged on (nvidia-smi samples, gpu_clocks.py).
#
# Here, on the project machine (build flashbob first, e.g. `ninja -C build-bench flashbob`):
#   FLASHBOB_BUILD_DIR=$PWD/build-bench scripts/device/pack.sh   # from the repository root;
#                                                  # plain pack.sh packs build/
# Device tool call (carry [".device"], timeout_s 600):
#   bash scripts/device/run-gpu.sh bash scripts/device/perf-table.sh
# Comes back under $OUT (at most 8 files): perf-table.md (the table), perf-raw.json (every
# figure: bench JSON per call, torch measurements, ceilings, probe), perf-table.log (this
# script's progress lines, timestamped), flashbob-bench.log (every bench call's full output),
# profile.log (Nsight Compute's details per kernel).
# The table is rewritten after each phase, so a run cut short still returns what it measured.
# PERF_BUDGET_S (default 540) is the wall time this script plans for; PERF_NS / PERF_DS restrict
# the grid (comma-separated) for a quick try.
set -uo pipefail
START=$(date +%s)
BUDGET=${PERF_BUDGET_S:-540}
END=$((START + BUDGET))
# Seconds kept for the last phase, the kernels' profile (26 s with the kernels cached by the
# phases before it; PERF_PROFILE_S=0 leaves it out).
PROFILE_S=${PERF_PROFILE_S:-40}
: "${OUT:?OUT must name the output directory (the device tool sets it)}"
WORK=/tmp/flashbob-perf
rm -rf "$WORK" && mkdir -p "$WORK"
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache PYTHONUNBUFFERED=1
PY=(python3 bench/compare_torch.py --out "$WORK")
GRID=()
[ -n "${PERF_NS:-}" ] && GRID+=(--ns "$PERF_NS")
[ -n "${PERF_DS:-}" ] && GRID+=(--ds "$PERF_DS")
exec > >(tee -a "$OUT/perf-table.log") 2>&1

stamp() { echo "[$(date +%H:%M:%S) +$(($(date +%s) - START))s] $*"; }
left() { echo $((END - $(date +%s))); }
publish() { # the table so far, and the files that come back
  timeout 60 "${PY[@]}" table > /dev/null 2>&1 || stamp "table phase failed (rc=$?)"
  for f in perf-table.md perf-raw.json flashbob-bench.log profile.log; do
    [ -f "$WORK/$f" ] && cp "$WORK/$f" "$OUT/$f"
  done
}
# Runs one phase with a hard limit of its seconds (the python side also plans for its deadline).
phase() {
  local name=$1 limit=$2; shift 2
  if ((limit < 15)); then stamp "phase $name: skipped (only ${limit} s left)"; return; fi
  stamp "phase $name: start (limit ${limit} s)"
  timeout --signal=TERM --kill-after=10 "$limit" "$@"
  stamp "phase $name: end (rc=$?)"
}

stamp "perf-table: budget ${BUDGET} s"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv 2>&1 | sed 's/^/  /'
F=.device/bin/flashbob
[ -x "$F" ] || { stamp "no $F: run scripts/device/pack.sh here and carry .device"; exit 1; }
# The device copy of the tree may carry a stale .git: the caller passes the commit.
GIT=${FLASHBOB_GIT_REV:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
python3 - "$WORK/env.json" "$GIT" <<'EOF'
import json, sys, time
json.dump({"date": time.strftime("%Y-%m-%d %H:%M"), "git": sys.argv[2],
           "command": "bash scripts/device/run-gpu.sh bash scripts/device/perf-table.sh"},
          open(sys.argv[1], "w"))
EOF

# cuBLAS for the CLI's ceiling (dlopen'ed, never linked): the toolkit's, else PyTorch's wheel.
if [ -z "${FLASHBOB_CUBLAS:-}" ]; then
  for c in /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/lib64/libcublas.so.12 \
      $(python3 -c 'import glob, site
for d in site.getsitepackages():
    print(" ".join(sorted(glob.glob(d + "/nvidia/**/libcublas.so.*", recursive=True))))' 2>/dev/null); do
    if [ -e "$c" ]; then export FLASHBOB_CUBLAS=$c; break; fi
  done
fi
stamp "FLASHBOB_CUBLAS=${FLASHBOB_CUBLAS:-<not found: the CLI tries libcublas.so.13/.12/.so>}"
CUBLAS_DIR=$(dirname "${FLASHBOB_CUBLAS:-/nonexistent/x}")

# 1. PyTorch's matmul ceiling (used by our bench only if the CLI cannot load cuBLAS).
phase ceiling 90 "${PY[@]}" ceiling
# 2. Ours (most of the budget; the later phases need about 200 s). cuBLAS's directory goes on
#    the library path of this phase only (libcublasLt beside it), never into PyTorch's. The SM
#    clock, power and throttle reasons are sampled throughout (bench/gpu_clocks.py), so that the
#    table says what the GPU ran at during each of our calls.
nvidia-smi --query-gpu="$(python3 bench/gpu_clocks.py --query)" \
  --format=csv,noheader,nounits -lms 100 > "$WORK/gpu-samples.csv" 2> /dev/null &
SAMPLER=$!
phase ours $(( $(left) - 190 - PROFILE_S )) env LD_LIBRARY_PATH="$CUBLAS_DIR:${LD_LIBRARY_PATH:-}" \
  "${PY[@]}" ours --flashbob "$F" --deadline $((END - 200 - PROFILE_S)) ${GRID[@]+"${GRID[@]}"}
kill "$SAMPLER" 2> /dev/null; wait "$SAMPLER" 2> /dev/null
publish
# 3. PyTorch on the same shapes.
phase torch $(( $(left) - 60 - PROFILE_S )) "${PY[@]}" torch --deadline $((END - 70 - PROFILE_S)) ${GRID[@]+"${GRID[@]}"}
publish
# 4. torch.compile and double backward, once.
LIMIT=$(( $(left) - 15 - PROFILE_S )); ((LIMIT > 120)) && LIMIT=120
phase compile-probe "$LIMIT" "${PY[@]}" compile-probe
publish
# 5. Nsight Compute on each kernel at 16K (the targets section's profile; kernel-profile.sh).
if ((PROFILE_S > 0)); then
  phase profile $(( $(left) - 5 )) bash -c 'bash scripts/device/kernel-profile.sh > "$1/profile.log" 2>&1' _ "$WORK"
  publish
fi
stamp "perf-table: done; the table:"
cat "$OUT/perf-table.md" 2>/dev/null || stamp "no table was written"
