"""The outputs: the header (where and how it was measured), the markdown tables and the CSV.
Pure Python, from the results and a dict describing the machine."""

import csv
import io
import shlex

from ._args import describe
from ._result import FAILED, OK, OOM, REFUSED, SKIPPED
from ._spec import FLOPS_PER_PAIR, IMPL_LABELS, OP_TITLES, format_n, groups

CSV_FIELDS = ("op", "impl", "batch", "heads", "n", "m", "d", "causal", "dtype", "status",
              "median_ms", "min_ms", "runs", "tflops", "pct_ceiling", "peak_bytes", "detail")


def command_line(prog, argv):
    return " ".join([prog] + [shlex.quote(a) for a in argv])


def header_lines(env, config, ceiling, check, prog):
    """The header's lines: the machine, the software, the command, the method."""
    L = ["# FlashBoB vs PyTorch attention", ""]
    gpu = env.get("gpu", "?")
    extra = ", ".join(x for x in (env.get("sm"), f"{env['sms']} SMs" if env.get("sms") else None,
                                  f"{env['memory_gib']:.0f} GiB" if env.get("memory_gib") else None) if x)
    L.append(f"- GPU: {gpu}" + (f" ({extra})" if extra else "") +
             f", driver {env.get('driver', 'unknown')}.")
    L.append(f"- Software: torch {env.get('torch', '?')} (CUDA {env.get('cuda', '?')}, cuDNN "
             f"{env.get('cudnn', '?')}), flashbob {env.get('flashbob', '?')} (commit "
             f"{env.get('commit') or 'unknown'}), Python {env.get('python', '?')}; {env.get('date', '')}.")
    L.append(f"- Command: `{command_line(prog, config.argv)}`")
    grid = "; ".join(describe(config))
    L.append(f"- Problem: batch {config.batch}, {config.heads} heads, {config.dtype}, q, k, v "
             f"(batch, heads, N, d) contiguous, scale 1/sqrt(d); {grid}.")
    if ceiling and ceiling.get("tflops"):
        sizes = ", ".join(f"{s}^3" for s in ceiling.get("sizes", []))
        L.append(f"- Ceiling: bf16 torch.matmul of square matrices, the best of {sizes}: "
                 f"**{ceiling['tflops']:.1f} TFLOP/s** (at {ceiling.get('size')}^3).")
    else:
        L.append(f"- Ceiling: not measured ({(ceiling or {}).get('error', 'no figure')}); "
                 "no % of it is shown.")
    if check:
        L.append(f"- Check: {check_sentence(check)}")
    L.append(f"- Timing: per cell one untimed run (it compiles what is needed and gives the peak "
             f"memory), {config.warmup} warm-up run(s), then {config.iters} timed run(s), each "
             f"after {env.get('flush_mib', 256)} MiB were written to flush the L2, timed with CUDA "
             f"events; the median is shown.")
    counts = ", ".join(f"{OP_SHORT[op]} {FLOPS_PER_PAIR[op]}" for op in FLOPS_PER_PAIR)
    L.append(f"- TFLOP/s: canonical flops per head, in units of N M d: {counts} (backward = 2.5x "
             "the forward, BoB 36 as the `flashbob` CLI counts it; docs/bob-math.md, \"Work\"), "
             "halved when causal; % = of the ceiling above.")
    L.append("- Memory: the peak of torch.cuda.max_memory_allocated during the untimed run, over "
             "what was allocated before it (the inputs, eager's causal mask and for BoB the first "
             "backward's graph are not counted).")
    L.append(f"- Cells: time · TFLOP/s · % of ceiling · peak memory. *{OOM}*: out of memory (a "
             f"larger N is not tried); *{REFUSED}*: the backend does not run this operation (why: "
             f"the list at the end and the CSV); *{SKIPPED}*: the time limit; *{FAILED}*: an "
             "error (listed at the end). The last column: the fastest other implementation's "
             "time over FlashBoB's (above 1: FlashBoB is faster).")
    return L


OP_SHORT = {"fwd": "forward", "fwd-bwd": "forward + backward", "fwd-jvp": "forward + JVP",
            "bob": "BoB", "hvp": "HVP step"}


def check_sentence(check):
    status = "PASS" if check.get("passed") else "**FAIL**"
    worst = check.get("worst")
    worst_text = f"{worst[1]:.1e} ({worst[0]})" if worst else "-"
    return (f"FlashBoB against eager float64 autograd on the same {check.get('dtype', '')}-rounded "
            f"inputs ({check.get('shape', '')}): worst relative L2 error {worst_text}, bound "
            f"{check.get('bound', 0):.0e}: {status}.")


def gib(b):
    if b is None:
        return "-"
    return f"{b / 2**30:.2f} GiB" if b >= 2**28 else f"{b / 2**20:.0f} MiB"


def ms_text(x):
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def cell_text(r):
    """What a table cell shows for one result (None: not in the grid)."""
    if r is None:
        return "-"
    if r.status == OK:
        parts = [f"{ms_text(r.median_ms)} ms"]
        t = r.tflops
        parts.append(f"{t:.1f} TFLOP/s" if t is not None else "-")
        if r.pct_ceiling is not None:
            parts.append(f"{r.pct_ceiling:.0f}%")
        parts.append(gib(r.peak_bytes))
        return " · ".join(parts)
    return r.status


def speedup_text(row, impls):
    """The fastest other implementation's time over FlashBoB's, and which one it was."""
    ours = row.get("flashbob")
    if ours is None or ours.status != OK:
        return "-"
    others = [(r.median_ms, impl) for impl, r in row.items()
              if impl != "flashbob" and impl in impls and r is not None and r.status == OK]
    if not others:
        return "no other ran"
    best_ms, best = min(others)
    return f"{best_ms / ours.median_ms:.2f}x ({IMPL_LABELS[best]})"


def group_title(g):
    return f"{OP_TITLES[g.op]}; d = {g.d}, {'causal' if g.causal else 'not causal'}"


def tables(results, config):
    """One markdown table per (operation, head dim, mask): a row per N, a column per
    implementation."""
    index = {(r.cell.op, r.cell.impl, r.cell.n, r.cell.d, r.cell.causal): r for r in results}
    impls = config.impls
    L = []
    for g in groups(config.head_dims, config.causal_modes, config.ops):
        rows = [n for n in config.ns if any((g.op, i, n, g.d, g.causal) in index for i in impls)]
        if not rows:
            continue
        L += [f"## {group_title(g)}", ""]
        with_speedup = "flashbob" in impls and len(impls) > 1
        head = ["N"] + [IMPL_LABELS[i] for i in impls] + (["fastest other / FlashBoB"] if with_speedup else [])
        L.append("| " + " | ".join(head) + " |")
        L.append("|" + "---|" * len(head))
        for n in rows:
            row = {i: index.get((g.op, i, n, g.d, g.causal)) for i in impls}
            cells = [format_n(n)] + [cell_text(row[i]) for i in impls]
            if with_speedup:
                cells.append(speedup_text(row, impls))
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
    return L


def notes(results):
    """The refusals (once per implementation, operation and reason) and every failure."""
    L = []
    refused, failed = {}, []
    for r in results:
        c = r.cell
        if r.status == REFUSED:
            refused.setdefault((c.impl, c.op, r.detail), []).append(r)
        elif r.status == FAILED:
            failed.append(r)
    if failed:
        L += ["## Failures", ""]
        for r in failed:
            c = r.cell
            L.append(f"- {IMPL_LABELS[c.impl]}, {OP_SHORT[c.op]}, d = {c.d}, "
                     f"{'causal' if c.causal else 'not causal'}, N = {format_n(c.n)}: {r.detail}")
        L.append("")
    if refused:
        L += ["## Refusals", ""]
        for (impl, op, detail), rs in refused.items():
            where = ", ".join(f"d = {d}" for d in sorted({r.cell.d for r in rs})) + "; " + ", ".join(
                "causal" if c else "not causal" for c in sorted({r.cell.causal for r in rs}))
            L.append(f"- {IMPL_LABELS[impl]}, {OP_SHORT[op]} ({where}): {detail}")
        L.append("")
    return L


def markdown(env, config, ceiling, check, results, prog):
    return "\n".join(header_lines(env, config, ceiling, check, prog) + [""] + tables(results, config)
                     + notes(results))


def csv_text(results):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in results:
        c = r.cell
        w.writerow([c.op, c.impl, r.batch, r.heads, c.n, c.n, c.d, int(c.causal), r.dtype, r.status,
                    _num(r.median_ms, 4), _num(r.min_ms, 4), len(r.times_ms) if r.status == OK else 0,
                    _num(r.tflops, 2), _num(r.pct_ceiling, 1),
                    "" if r.peak_bytes is None else r.peak_bytes, r.detail])
    return out.getvalue()


def _num(x, digits):
    return "" if x is None else f"{x:.{digits}f}"



def progress_line(result, elapsed_s):
    """One cell as the progress on stderr shows it."""
    c = result.cell
    what = (f"{OP_SHORT[c.op]}, d={c.d}{' causal' if c.causal else ''}, N={format_n(c.n)}, "
            f"{IMPL_LABELS[c.impl]}")
    if result.status == OK:
        text = cell_text(result)
    else:
        text = result.status + (f": {result.detail}" if result.detail else "")
    return f"[{elapsed_s:7.1f} s] {what}: {text}"
