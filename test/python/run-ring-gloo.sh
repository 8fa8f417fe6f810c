#!/usr/bin/env bash
# CTest entry for ring_gloo_simulation.py (a CPU test: CI runs it with Debian's python3-torch,
# scripts/common.sh). Runs it with the first interpreter that has torch.distributed with gloo:
# $PYTHON, Debian's /usr/bin/python3, then python3; skipped (exit 77, with the reason) where none
# has it.
for py in ${PYTHON:+"$PYTHON"} /usr/bin/python3 python3; do
  if "$py" -c 'import torch.distributed as d, sys; sys.exit(not (d.is_available() and d.is_gloo_available()))' >/dev/null 2>&1; then
    exec "$py" "$(dirname "$0")/ring_gloo_simulation.py"
  fi
done
echo "SKIPPED: no python here has torch.distributed with gloo (Debian: apt-get install python3-torch)"
exit 77
