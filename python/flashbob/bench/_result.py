"""One cell's outcome and how a failure is told apart: out of memory, a backend that refuses the
operation, or a real failure. Pure Python: the measuring code hands over an exception's type
name and message, never the exception."""

import re
import statistics
from dataclasses import dataclass, field
from typing import List, Optional

from ._spec import Cell, tflops

OK, OOM, REFUSED, FAILED, SKIPPED = "ok", "OOM", "refused", "failed", "skipped"
STATUSES = (OK, OOM, REFUSED, FAILED, SKIPPED)


@dataclass
class Result:
    cell: Cell
    batch: int
    heads: int
    dtype: str
    status: str
    times_ms: List[float] = field(default_factory=list)
    peak_bytes: Optional[int] = None
    detail: str = ""
    ceiling_tflops: Optional[float] = None
    wall_s: float = 0.0

    @property
    def median_ms(self):
        return statistics.median(self.times_ms) if self.status == OK and self.times_ms else None

    @property
    def min_ms(self):
        return min(self.times_ms) if self.status == OK and self.times_ms else None

    @property
    def tflops(self):
        c = self.cell
        return tflops(c.op, self.batch, self.heads, c.n, c.n, c.d, c.causal, self.median_ms)

    @property
    def pct_ceiling(self):
        t = self.tflops
        if t is None or not self.ceiling_tflops:
            return None
        return 100.0 * t / self.ceiling_tflops


# How PyTorch words an allocation failure: its allocator's OutOfMemoryError ("CUDA out of
# memory. Tried to allocate ..."), a CUDA call's cudaErrorMemoryAllocation, cuDNN's and cuBLAS's
# own statuses, and FlashBoB's C API passing on the driver's CUDA_ERROR_OUT_OF_MEMORY.
_OOM_PATTERNS = re.compile(r"out of memory|CUDNN_STATUS_ALLOC_FAILED|CUBLAS_STATUS_ALLOC_FAILED|"
                           r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY", re.IGNORECASE)


def is_oom(type_name, message):
    return type_name.endswith("OutOfMemoryError") or bool(_OOM_PATTERNS.search(message or ""))


def tried_allocation(message):
    """What the allocator tried to allocate ("32.00 GiB"), when its message says."""
    m = re.search(r"Tried to allocate ([0-9.]+ [KMGT]?i?B)", message or "")
    return m.group(1) if m else None


def classify(impl, type_name, message, warnings=()):
    """(status, detail) of a cell whose run raised. Out of memory is OOM for every
    implementation. Anything else PyTorch raises is the backend refusing the operation (no
    kernel for these inputs, no double backward, no forward-mode formula): SDPA says why in
    warnings, which are appended. From FlashBoB anything else is a failure."""
    first = first_line(message)
    if is_oom(type_name, message):
        tried = tried_allocation(message)
        return OOM, f"tried to allocate {tried}" if tried else first
    detail = f"{type_name}: {first}" if first else type_name
    if impl == "flashbob":
        return FAILED, detail
    reasons = []
    for w in warnings:
        line = first_line(w)
        # SDPA's "... kernel not used because:" heads the warnings that say why: itself says nothing.
        if line and not line.endswith(":") and line not in reasons:
            reasons.append(line)
    if reasons:
        detail += " (" + "; ".join(reasons[:3]) + ")"
    return REFUSED, detail


def first_line(text, limit=200):
    """The first non-empty line of a message, cut to `limit` characters; PyTorch's
    "(Triggered internally at ...)" tails dropped."""
    for line in (text or "").splitlines():
        line = re.sub(r"\s*\(Triggered internally at [^)]*\)\.?", "", line).strip()
        if line:
            return line if len(line) <= limit else line[:limit - 3] + "..."
    return ""
