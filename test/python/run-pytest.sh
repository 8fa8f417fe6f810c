#!/usr/bin/env bash
# CTest entry for the PyTorch tests: skipped (exit 77, with the reason) where torch or a GPU is
# missing, which is every CI machine; on the GPU machine it runs pytest.
PY="${PYTHON:-python3}"
reason=$("$PY" -c 'import torch, sys; sys.exit(0) if torch.cuda.is_available() else print("torch sees no CUDA device")' 2>&1) || true
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  echo "SKIPPED: torch is not installed for $PY"
  exit 77
fi
if [ -n "$reason" ]; then
  echo "SKIPPED: $reason"
  exit 77
fi
exec "$PY" -m pytest -q -s "$(dirname "$0")" "$@"
