"""`python -m flashbob.bench`: parse, check that torch can run it, check FlashBoB against float64,
measure the ceiling, run the grid, write the outputs. torch is imported only after the command
line was parsed (so that --help and argument errors need no torch)."""

import gc
import platform
import sys
import time
from pathlib import Path

from . import _args, _env, _plot, _report
from ._plan import Planner
from ._result import FAILED, OOM, SKIPPED, Result, classify
from ._spec import grid

PROG = "python -m flashbob.bench"


def log(message):
    print(message, file=sys.stderr, flush=True)


def main(argv=None, prog=None):
    """Runs the benchmark on `argv` (default: this process's arguments); returns the exit code:
    0, 1 (no usable torch or GPU, a failed check, a FlashBoB cell that failed), 2 (usage), 130
    (interrupted: what was measured is still written)."""
    prog = prog or PROG
    argv = sys.argv[1:] if argv is None else list(argv)
    config = _args.parse(argv, prog)
    problem = _env.torch_problem()
    if problem:
        log(f"{prog}: {problem}")
        return 1
    return run(config, prog)


def environment(config, measure, flusher):
    import torch
    import flashbob

    props = torch.cuda.get_device_properties(config.device)
    return {"gpu": props.name, "sm": f"sm_{props.major}{props.minor}",
            "sms": props.multi_processor_count, "memory_gib": props.total_memory / 2**30,
            "driver": _env.driver_version(config.device), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": measure.cudnn_version(),
            "python": platform.python_version(), "flashbob": _flashbob_version(flashbob),
            "commit": _env.find_commit(Path(flashbob.__file__).parent, config.commit),
            "date": time.strftime("%Y-%m-%d %H:%M %Z"), "flush_mib": flusher.nbytes >> 20}


def _flashbob_version(flashbob):
    """The library's version; where it cannot be loaded, why (the check then fails, saying so)."""
    try:
        return flashbob.version()
    except Exception as e:  # FlashBobError, NoDriverError: the header says so
        return f"unavailable ({e})"


def _device(torch, config):
    torch.cuda.set_device(config.device)
    return torch.device("cuda", config.device)


def run(config, prog):
    import torch
    from . import _measure as measure

    device = _device(torch, config)
    planner = Planner(config)
    flusher = measure.Flusher(device)
    env = environment(config, measure, flusher)
    log(f"{prog}: {env['gpu']}, driver {env['driver']}, torch {env['torch']}, flashbob "
        f"{env['flashbob']} (commit {env['commit'] or 'unknown'})")

    check = None
    if "flashbob" in config.impls:
        check = measure.check_flashbob(config, device)
        log(f"check: {_report.check_sentence(check)}")
        if not check["passed"]:
            for name, err in sorted(check["errors"].items()):
                log(f"  {name}: {err:.2e}")
            for p in check["problems"]:
                log(f"  {p}")
            log(f"{prog}: FlashBoB's outputs do not match float64 autograd: this install is "
                "broken, so no table is written")
            return 1

    ceiling = measure.measure_ceiling(config.ceiling_sizes, device)
    log("ceiling: " + (f"{ceiling['tflops']:.1f} TFLOP/s (bf16 matmul {ceiling['size']}^3)"
                       if ceiling.get("tflops") else f"not measured: {ceiling.get('error')}"))

    results = _run_grid(config, measure, device, planner, flusher, ceiling.get("tflops"))

    text = _report.markdown(env, config, ceiling, check, results, prog)
    print(text, flush=True)
    if config.markdown:
        Path(config.markdown).write_text(text + "\n")
        log(f"markdown: {config.markdown}")
    if config.csv:
        Path(config.csv).write_text(_report.csv_text(results))
        log(f"csv: {config.csv}")
    if config.plot:
        title = f"FlashBoB vs PyTorch, {env['gpu']}, batch {config.batch}, {config.heads} heads, {config.dtype}"
        why_not = _plot.draw(config.plot, results, config, config.plot_metric, title)
        log(f"plot: {config.plot}" if why_not is None else
            f"plot: not written: {why_not}; the CSV{' (--csv)' if not config.csv else ''} has the same figures")
    failed = [r for r in results if r.status == FAILED and r.cell.impl == "flashbob"]
    log(f"done in {planner.elapsed():.0f} s: {len(results)} cells, "
        + ", ".join(f"{s} {n}" for s, n in _count_statuses(results)))
    if failed:
        log(f"{prog}: {len(failed)} FlashBoB cell(s) failed (see the table's Failures)")
        return 1
    if any(r.status == SKIPPED and r.detail == "interrupted" for r in results):
        return 130  # as a shell reports a command ended by Ctrl-C
    return 0


def _run_grid(config, measure, device, planner, flusher, ceiling_tflops):
    """Every cell's Result, in the grid's order. Ctrl-C marks the cells left skipped, so that
    what was measured is still written."""
    import torch

    results = []
    inputs, inputs_key, inputs_failure = None, None, None
    interrupted = False
    for cell in grid(config.ns, config.head_dims, config.causal_modes, config.ops, config.impls):
        if interrupted:
            results.append(Result(cell, config.batch, config.heads, config.dtype, SKIPPED,
                                  detail="interrupted"))
            continue
        try:
            verdict = planner.verdict(cell)
            if verdict is None and (cell.n, cell.d) != inputs_key:
                inputs = None
                gc.collect()
                torch.cuda.empty_cache()
                inputs_key, inputs_failure = (cell.n, cell.d), None
                try:
                    inputs = measure.Inputs(config.batch, config.heads, cell.n, cell.d,
                                            measure.DTYPES[config.dtype], device, seed=cell.n + cell.d)
                except Exception as e:  # the inputs alone do not fit: every cell of this shape
                    status, detail = classify(cell.impl, type(e).__name__, str(e))
                    inputs_failure = (status if status == OOM else FAILED, "inputs: " + detail)
                    inputs = None
                    gc.collect()
                    torch.cuda.empty_cache()
            if verdict is None and inputs_failure is not None:
                verdict = inputs_failure
            if verdict is not None:
                result = Result(cell, config.batch, config.heads, config.dtype, verdict[0],
                                detail=verdict[1])
            else:
                result = measure.run_cell(cell, inputs, config, flusher, ceiling_tflops)
        except KeyboardInterrupt:
            interrupted = True
            log("interrupted: the cells left are marked skipped; writing what was measured")
            result = Result(cell, config.batch, config.heads, config.dtype, SKIPPED, detail="interrupted")
        planner.record(result)
        results.append(result)
        log(_report.progress_line(result, planner.elapsed()))
    return results


def _count_statuses(results):
    counts = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return sorted(counts.items())
