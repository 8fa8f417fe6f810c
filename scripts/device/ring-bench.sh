#!/usr/bin/env bash
# GPU machine: bench/ring_scaling.py (context-parallel BoB against one GPU, issue 20) with the
# wheel as a user installs it. Arguments pass through to the tool.
# Device tool call (carry ["dist"]):
#   bash scripts/device/ring-bench.sh --modes single,simulate --n 1048576 --heads 16 --d 128 --causal
# On a machine with two GPUs, --modes single,ring times the real NCCL rings.
set -euo pipefail
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
export NCCL_NVLS_ENABLE=0  # the GPU machines require it
source "$(dirname "${BASH_SOURCE[0]}")/install-wheel.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$PY" bench/ring_scaling.py "$@"
