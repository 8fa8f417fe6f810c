#!/usr/bin/env bash
# GPU machine: a Python tool (bench/*.py) with the wheel as a user installs it (install-wheel.sh)
# and NCCL_NVLS_ENABLE=0, as the GPU machines require. Arguments: the script and its arguments.
# On the GPU machine, with dist/ (scripts/build-wheel.sh) copied along:
#   bash scripts/device/wheel-python.sh bench/ring_scaling.py --modes single,simulate --causal
#   bash scripts/device/wheel-python.sh bench/hvp_step.py
set -euo pipefail
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
export NCCL_NVLS_ENABLE=0
source "$(dirname "${BASH_SOURCE[0]}")/install-wheel.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$PY" "$@"
