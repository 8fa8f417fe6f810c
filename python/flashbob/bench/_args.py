"""The command line of `python -m flashbob.bench` and the configuration it makes. Pure Python:
`--help` and every argument check work without torch or a GPU."""

import argparse
import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ._spec import DTYPES, IMPLS, OPS, format_n

# The README's table: batch 1, 16 heads (the shapes of the repository's earlier tables).
FULL = {
    "ns": [1024 << i for i in range(6)],  # 1K .. 32K
    "head_dims": [64, 128],
    "batch": 1,
    "heads": 16,
    "warmup": 1,
    "iters": 10,
    "ceiling_sizes": [4096, 8192, 16384],
}
# --quick: a smoke test of every operation and implementation in under a minute.
QUICK = {
    "ns": [1024, 2048],
    "head_dims": [64],
    "batch": 1,
    "heads": 8,
    "warmup": 1,
    "iters": 3,
    "ceiling_sizes": [4096, 8192],
}

DESCRIPTION = """\
FlashBoB against PyTorch attention on this machine's GPU: forward, forward + backward,
forward + JVP, BoB (the second backward) and the HVP step, for FlashBoB
(flashbob.torch.attention), SDPA with each of its backends (cuDNN, flash, efficient, math;
a backend that refuses an operation is marked so) and eager attention
(softmax(q k^T s + mask) v in tensor ops), over sequence lengths N = M.

Each cell: one untimed run (compiles what is needed, measures the peak memory), the warm-up
runs, then the timed runs, each after the L2 was flushed, timed with CUDA events; the median is
reported, with TFLOP/s by canonical counts and its share of a bf16 matmul ceiling measured in
the same run. FlashBoB's outputs are first checked against float64 autograd on a small
problem: a failing check stops the run before any table.

Writes the markdown table to stdout (progress goes to stderr), and with the options below a
markdown file, a CSV and a PNG plot (the plot needs matplotlib)."""

EPILOG = """\
examples:
  python -m flashbob.bench --quick
  python -m flashbob.bench --markdown perf.md --csv perf.csv --plot perf.png
  python -m flashbob.bench --ops bob,hvp --head-dims 128 --ns 4K,16K,64K --causal yes
  flashbob bench --compare --quick           (the same, through the wheel's flashbob command)"""


@dataclass
class Config:
    ns: List[int]
    head_dims: List[int]
    causal_modes: List[bool]
    ops: List[str]
    impls: List[str]
    batch: int
    heads: int
    dtype: str
    warmup: int
    iters: int
    ceiling_sizes: List[int]
    quick: bool = False
    time_limit: Optional[float] = None
    markdown: Optional[str] = None
    csv: Optional[str] = None
    plot: Optional[str] = None
    plot_metric: str = "tflops"
    commit: Optional[str] = None
    device: int = 0
    argv: List[str] = field(default_factory=list)


def parse_size(text):
    """A sequence length: 4096, 4K (x1024) or 1M (x1048576)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)\s*", text)
    if not m:
        raise ValueError(f"not a length: {text!r} (write 4096, 4K or 1M)")
    value = int(m.group(1)) << {"": 0, "k": 10, "m": 20}[m.group(2).lower()]
    if value <= 0:
        raise ValueError(f"a length must be positive, got {text!r}")
    return value


def _list(parse_one, what):
    def parse(text):
        items = [t for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"an empty list of {what}")
        try:
            return [parse_one(t.strip()) for t in items]
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
    return parse


def _positive_int(text):
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be positive, got {text}")
    return value


def _names(allowed, what):
    def one(text):
        if text not in allowed:
            raise ValueError(f"unknown {what} {text!r} (choose from {', '.join(allowed)})")
        return text
    return one


def _count(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def build_parser(prog=None):
    ap = argparse.ArgumentParser(prog=prog or "python -m flashbob.bench", description=DESCRIPTION,
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    full_ns = ",".join(format_n(n) for n in FULL["ns"])
    grid = ap.add_argument_group("the grid")
    grid.add_argument("--quick", action="store_true",
                      help="a small grid for a smoke test, under a minute: N = 1K,2K, head dim 64, "
                           "8 heads, 3 timed runs (options given explicitly still apply)")
    grid.add_argument("--ns", type=_list(parse_size, "lengths"), metavar="N,N,...",
                      help=f"sequence lengths N = M (K = 1024, M = 1048576; default {full_ns})")
    grid.add_argument("--head-dims", type=_list(_positive_int, "head dims"), metavar="D,D,...",
                      help="head dimensions (default 64,128)")
    grid.add_argument("--causal", choices=("both", "yes", "no"), default="both",
                      help="causal mask, no mask, or both (default both)")
    grid.add_argument("--ops", type=_list(_names(OPS, "operation"), "operations"),
                      metavar="OP,OP,...", help=f"operations (default all: {','.join(OPS)})")
    grid.add_argument("--impls", type=_list(_names(IMPLS, "implementation"), "implementations"),
                      metavar="IMPL,...", help=f"implementations (default all: {','.join(IMPLS)})")
    grid.add_argument("--batch", type=_count(1), help="batch size (default 1)")
    grid.add_argument("--heads", type=_count(1), help="heads (default 16; --quick 8)")
    grid.add_argument("--dtype", choices=DTYPES, default="bf16", help="input dtype (default bf16)")
    timing = ap.add_argument_group("timing")
    timing.add_argument("--warmup", type=_count(0),
                        help="untimed runs after the first one, per cell (default 1)")
    timing.add_argument("--iters", type=_count(1),
                        help="timed runs per cell, whose median is reported (default 10; --quick 3)")
    timing.add_argument("--time-limit", type=_seconds, metavar="SECONDS",
                        help="stop starting cells after this many seconds, or when a cell's "
                             "estimate (from the same cell at a smaller N) would pass it; the "
                             "cells left are marked skipped (default: no limit)")
    timing.add_argument("--device", type=_count(0), default=0, help="CUDA device index (default 0)")
    out = ap.add_argument_group("output")
    out.add_argument("--markdown", metavar="FILE", help="also write the markdown to FILE")
    out.add_argument("--csv", metavar="FILE", help="write every cell as one CSV row to FILE")
    out.add_argument("--plot", metavar="FILE",
                     help="PNG: one panel per operation, head dim and mask, one line per "
                          "implementation (needs matplotlib; without it a note says so)")
    out.add_argument("--plot-metric", choices=("tflops", "time"), default="tflops",
                     help="what the plot's y axis shows (default tflops)")
    out.add_argument("--commit", metavar="REV",
                     help="the FlashBoB commit to name in the header (default: the one the wheel "
                          "was built from, or the checkout's, when known)")
    return ap


def parse(argv, prog=None):
    """The Config of a command line (argparse exits with status 2 and a message on bad input)."""
    ap = build_parser(prog)
    a = ap.parse_args(argv)
    base = QUICK if a.quick else FULL

    def pick(name):
        value = getattr(a, name)
        return base[name] if value is None else value

    causal_modes = {"both": [False, True], "yes": [True], "no": [False]}[a.causal]
    return Config(ns=sorted(set(pick("ns"))), head_dims=_unique(pick("head_dims")),
                  causal_modes=causal_modes, ops=_ordered(a.ops, OPS), impls=_ordered(a.impls, IMPLS),
                  batch=pick("batch"), heads=pick("heads"), dtype=a.dtype, warmup=pick("warmup"),
                  iters=pick("iters"), ceiling_sizes=list(base["ceiling_sizes"]), quick=a.quick,
                  time_limit=a.time_limit, markdown=a.markdown, csv=a.csv, plot=a.plot,
                  plot_metric=a.plot_metric, commit=a.commit, device=a.device,
                  argv=list(argv))


def _unique(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def _ordered(chosen, canonical):
    """The chosen names (all by default) in the canonical order, each once."""
    if chosen is None:
        return list(canonical)
    return [name for name in canonical if name in chosen]


def describe(config) -> Tuple[str, ...]:
    """The grid in words, for the header."""
    causal = {(False, True): "causal and not", (True,): "causal", (False,): "not causal"}
    return (f"N = M = {', '.join(format_n(n) for n in config.ns)}",
            f"head dims {', '.join(map(str, config.head_dims))}",
            causal[tuple(config.causal_modes)])
