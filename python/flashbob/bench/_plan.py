"""Which cells run: a cell is not tried when the same implementation and operation ran out of
memory at a smaller N (memory only grows with N), nor once the time limit is reached or its
estimate (the same cell's median at a smaller N, scaled by N^2) would pass it. Pure Python."""

import time

from ._result import OK, OOM, SKIPPED
from ._spec import format_n

# Seconds a cell costs besides its runs (allocation, synchronization, a first call).
CELL_OVERHEAD_S = 0.5


class Planner:
    def __init__(self, config, clock=time.monotonic):
        self.config = config
        self.clock = clock
        self.start = clock()
        self._oom_at = {}   # (impl, op, d, causal) -> the smallest N that ran out of memory
        self._last_ok = {}  # (impl, op, d, causal) -> (N, median ms) of the largest N that ran

    def elapsed(self):
        return self.clock() - self.start

    def runs_per_cell(self):
        return 1 + self.config.warmup + self.config.iters

    def estimate_s(self, cell):
        """Seconds the cell should take, from the same cell at a smaller N (None: no figure)."""
        key = (cell.impl, cell.op, cell.d, cell.causal)
        last = self._last_ok.get(key)
        if last is None:
            return None
        n, ms = last
        return CELL_OVERHEAD_S + self.runs_per_cell() * ms * 1e-3 * (cell.n / n) ** 2

    def verdict(self, cell):
        """None when the cell should run, else (status, detail) to record instead."""
        key = (cell.impl, cell.op, cell.d, cell.causal)
        oom = self._oom_at.get(key)
        if oom is not None and cell.n > oom:
            return OOM, f"not tried: out of memory at N = {format_n(oom)}"
        limit = self.config.time_limit
        if limit is not None:
            left = limit - self.elapsed()
            if left <= 0:
                return SKIPPED, f"time limit ({limit:.0f} s) reached"
            est = self.estimate_s(cell)
            if est is not None and est > left:
                return SKIPPED, f"time limit: estimated {est:.1f} s, {left:.1f} s left"
        return None

    def record(self, result):
        c = result.cell
        key = (c.impl, c.op, c.d, c.causal)
        if result.status == OOM:
            self._oom_at[key] = min(c.n, self._oom_at.get(key, c.n))
        elif result.status == OK and result.median_ms is not None:
            prev = self._last_ok.get(key)
            if prev is None or c.n >= prev[0]:
                self._last_ok[key] = (c.n, result.median_ms)
