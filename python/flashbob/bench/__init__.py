"""FlashBoB against PyTorch attention on this machine's GPU: `python -m flashbob.bench` (or the
wheel's `flashbob bench --compare`); `--help` says what it measures and how, `--quick` runs a
small grid in under a minute.

    python -m flashbob.bench --markdown perf.md --csv perf.csv --plot perf.png

Needs torch >= 2.4 with CUDA (flashbob.torch) to run; matplotlib only for --plot. The pieces
that need neither (the grid and flop counts in _spec, the command line in _args, the run's plan
in _plan, the tables and CSV in _report, the plot's data in _plot) import without them; the
measurements live in _measure, imported once torch was found usable.
"""

from ._main import main  # noqa: F401

__all__ = ["main"]
