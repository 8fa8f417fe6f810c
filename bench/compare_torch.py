#!/usr/bin/env python3
"""FlashBoB's kernels through the CLI against PyTorch on one GPU, judged against the targets of
docs/performance.md. The table a user runs, through the PyTorch op with every SDPA backend, is
`python -m flashbob.bench` (python/flashbob/bench); this one times the kernels alone (`flashbob
bench`, no Python in the timed region) and adds the targets, the GPU's clocks and the kernels'
profile.

Phases, each its own process so PyTorch's cached memory never sits beside our runs, run in this
order (docs/performance.md, "How to reproduce"):

  ceiling        PyTorch's dense bf16 matmul 8192^3 (the ceiling if the CLI cannot load cuBLAS)
  ours           `flashbob bench --json` over the grid (op x d x causal x N), with --check
  torch          exact BoB by eager double backward through plain matmul/softmax attention,
                 and SDPA forward/backward with the cuDNN and flash backends, same shapes
  compile-probe  torch.compile on the double backward, once, one small shape
  table          perf-table.md and perf-raw.json from the phases' JSON files, the GPU's clock
                 samples (OUT/gpu-samples.csv, bench/gpu_clocks.py, when taken) and the
                 kernels' profile (OUT/profile.log, scripts/device/kernel-profile.sh's output,
                 when it ran)

Every phase writes its JSON under --out as it goes; any single failure is recorded (status and
message) and the phase continues. Each measurement: warm-up, then timed runs with CUDA events
and the L2 flushed (256 MiB written) before each, until ~1.5 s were spent or 10 runs, at least 2;
the median is reported. Only the `table` phase runs without a GPU (and without torch).
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import traceback

import gpu_clocks
import profile_table  # bench/profile_table.py, beside this script: the kernels' profile table

BATCH = 1
HEADS = 16
DEFAULT_NS = [1024 << i for i in range(8)]  # 1K .. 128K
DEFAULT_DS = [64, 128]
OPS = ["bob", "fwd", "bwd"]
FLOPS_PER_PAIR = {"fwd": 4, "bwd": 10, "bob": 36}
FLUSH_BYTES = 256 << 20
TIME_BUDGET_S = 1.5
MAX_ITERS = 10
HBM_NOMINAL_TBS = 4.8

T0 = time.time()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} +{time.time() - T0:6.1f}s] {msg}", flush=True)


def canonical_flops(op, n, m, d, causal, heads=HEADS, batch=BATCH):
    return FLOPS_PER_PAIR[op] * n * m * d * batch * heads * (0.5 if causal else 1.0)


def fmt_n(n):
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def grid(args):
    for n in args.ns:
        for op in args.ops:
            for d in args.ds:
                for causal in (False, True):
                    yield op, d, causal, n


def remaining(deadline):
    return deadline - time.time()


# ---- phase: ours ---------------------------------------------------------------------------

CHECK_ROWS = 16


def check_rows_for(n, smallest, largest):
    """Rows compared with the float64 oracle (the dense oracle costs ~6 s per 16 rows at
    M = 128K, d = 128 on a slow CPU, so not every N is checked): at the smallest N every row and
    the key-major outputs (the runner does that when N M <= 2048^2), the last 16 rows at the
    largest N; None elsewhere (no check)."""
    if n == smallest or n == largest:
        return CHECK_ROWS
    return None


RUN_CHECK_LINE = re.compile(r"^\s{2}(\S+)\s+([0-9.]+E[-+][0-9]+|inf)(\s+FAIL)?\s*$")


def run_check(args, logf, op, d, causal, n, timeout):
    """`flashbob run --check` (one timed run) for a size the grid ran without a check."""
    cmd = [args.flashbob, "run", "--op", op, "--batch", str(BATCH), "--heads", str(HEADS),
           "--seq-q", str(n), "--head-dim", str(d), "--dtype", "bf16", "--iters", "1",
           "--check", "--check-rows", str(CHECK_ROWS)] + (["--causal"] if causal else [])
    res = {"cmd": " ".join(cmd), "via": "flashbob run --check"}
    t = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        output, res["exit"] = p.stdout, p.returncode
    except subprocess.TimeoutExpired:
        output, res["exit"] = "", None
        res["error"] = f"killed after {timeout:.0f} s"
    res["wall_s"] = time.time() - t
    logf.write(f"\n$ {res['cmd']}\n{output}[exit {res.get('exit')}, {res['wall_s']:.1f} s]\n")
    logf.flush()
    errors = {}
    for line in output.splitlines():
        m = RUN_CHECK_LINE.match(line)
        if m:
            errors[m.group(1)] = float(m.group(2)) if m.group(2) != "inf" else "inf"
    if "check: PASS" in output or "check: FAIL" in output:
        res.update(passed="check: PASS" in output, rel_l2=errors, rows=CHECK_ROWS, bound=5e-3)
    elif "error" not in res:
        lines = [l for l in output.strip().splitlines() if l.strip()]
        res["error"] = lines[-1] if lines else f"exit {res['exit']}, no output"
    return res


def bench_call(args, logf, cmd, timeout):
    """Runs one `flashbob bench ... --json last-bench.json`; returns the record fields."""
    last = os.path.join(args.out, "last-bench.json")
    cmd = cmd + ["--json", last]
    rec = {"cmd": " ".join(cmd)}
    try:
        os.remove(last)
    except OSError:
        pass
    t = time.time()
    rec["t0"] = t  # the call's window, for the GPU's clock samples (gpu_clocks.py)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        rec["exit"] = p.returncode
        output = p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        output = out.decode(errors="replace") if isinstance(out, bytes) else out
        rec.update(exit=None, status="timeout", error=f"killed after {timeout:.0f} s")
    except OSError as e:
        output = ""
        rec.update(exit=None, status="failed", error=f"could not start: {e}")
    rec["t1"] = time.time()
    rec["wall_s"] = rec["t1"] - t
    logf.write(f"\n$ {rec['cmd']}\n{output}[exit {rec.get('exit')}, {rec['wall_s']:.1f} s]\n")
    logf.flush()
    bench = read_json(last)
    if bench is not None:
        rec["bench"] = bench
    if "status" not in rec:
        if bench is not None and bench.get("ok"):
            check = bench.get("check") or {}
            rec["status"] = "ok" if check.get("passed", True) else "check-failed"
        else:
            rec["status"] = "failed"
            err = (bench or {}).get("error")
            if not err:
                lines = [l for l in output.strip().splitlines() if l.strip()]
                err = lines[-1] if lines else f"exit {rec['exit']}, no output"
            rec["error"] = err
    return rec


def run_ours(args):
    out_path = os.path.join(args.out, "ours.json")
    log_path = os.path.join(args.out, "flashbob-bench.log")
    results = []
    state = {"ceiling_tflops": args.ceiling_tflops,
             "ceiling_source": "given (--ceiling-tflops)" if args.ceiling_tflops else None,
             "results": results}
    smallest, largest = min(args.ns), max(args.ns)
    base = [args.flashbob, "bench", "--batch", str(BATCH), "--heads", str(HEADS), "--dtype", "bf16"]
    with open(log_path, "a") as logf:
        # A small first call measures the two ceilings (cuBLAS matmul, device copy) once; the grid
        # then gets the matmul ceiling with --ceiling-tflops (loading cuBLAS in every process
        # would cost ~1 s each).
        probe = bench_call(args, logf, base + ["--op", "fwd", "--seq-q", "1024", "--head-dim", "64",
                                               "--warmup", "1", "--iters", "3"], timeout=120)
        state["probe"] = probe
        pb = probe.get("bench") or {}
        state["device"] = pb.get("device")
        state["copy_tbs"] = (pb.get("copy") or {}).get("tbs")
        state["copy_note"] = (pb.get("copy") or {}).get("note")
        cb = pb.get("ceiling") or {}
        if state["ceiling_tflops"] is None:
            if cb.get("tflops"):
                state["ceiling_tflops"] = cb["tflops"]
                state["ceiling_source"] = (f"cuBLAS in `flashbob bench` ({os.path.basename(cb.get('library', '?'))}, "
                                           f"version {cb.get('cublas_version', '?')}), best of 5")
            else:
                tc = (read_json(os.path.join(args.out, "torch-ceiling.json"), {}) or {}).get("best_tflops")
                state["ceiling_cli_note"] = cb.get("note") or probe.get("error")
                if tc:
                    state["ceiling_tflops"] = tc
                    state["ceiling_source"] = ("PyTorch matmul, best of 10 (the CLI did not measure: "
                                               f"{state['ceiling_cli_note']})")
                else:
                    state["ceiling_source"] = f"none: {state['ceiling_cli_note']}"
        ceiling = state["ceiling_tflops"]
        log(f"ours: probe {probe['status']}; ceiling {ceiling} TFLOP/s ({state['ceiling_source']}); "
            f"copy {state['copy_tbs']} TB/s")
        write_json(out_path, state)

        prev = {}  # (op, d, causal) -> (N, wall_s, median_ms) of the last call that ran
        for op, d, causal, n in grid(args):
            key = (op, d, causal)
            rec = {"op": op, "d": d, "causal": causal, "N": n, "M": n, "heads": HEADS, "batch": BATCH}
            # Predict this call from the same config at a smaller N (time ~ N^2).
            est_wall, est_op_s = 5.0, 0.0
            if key in prev:
                pn, pwall, pms = prev[key]
                est_op_s = pms * 1e-3 * (n / pn) ** 2
                # fixed costs + first call (with the forward) + warm-up or not + at least 2 runs
                est_wall = min(pwall, 3.0) + est_op_s * (4 if op != "fwd" else 3)
            rows = check_rows_for(n, smallest, largest)
            if rows and key in prev:
                est_wall += 2.0 + 6.0 * (n / 131072) * (d / 128) * (1 if op == "bob" else 0.5)
            left = remaining(args.deadline)
            if est_wall > left:
                rec.update(status="skipped", error=f"time budget: estimated {est_wall:.0f} s, {left:.0f} s left")
                results.append(rec)
                log(f"ours {op} d={d} causal={int(causal)} N={fmt_n(n)}: skipped ({rec['error']})")
                write_json(out_path, state)
                continue
            warmup = 1 if est_op_s < 2.0 else 0  # above that the first call is the warm-up
            cmd = base + ["--op", op, "--seq-q", str(n), "--head-dim", str(d),
                          "--warmup", str(warmup), "--iters", str(MAX_ITERS),
                          "--time-budget", str(TIME_BUDGET_S)]
            if rows:
                cmd += ["--check", "--check-rows", str(rows)]
            if causal:
                cmd.append("--causal")
            if ceiling:
                cmd += ["--ceiling-tflops", f"{ceiling:.3f}"]
            rec.update(bench_call(args, logf, cmd, timeout=max(30.0, min(left + 30.0, 400.0))))
            if rec["status"] in ("ok", "check-failed"):
                b = rec["bench"]
                prev[key] = (n, rec["wall_s"], b["median_ms"])
                log(f"ours {op} d={d} causal={int(causal)} N={fmt_n(n)}: {b['median_ms']:.3f} ms "
                    f"{b['tflops']:.1f} TFLOP/s, {b['iters']} runs, check {check_summary(b.get('check'))} "
                    f"[{rec['wall_s']:.1f} s]")
            else:
                log(f"ours {op} d={d} causal={int(causal)} N={fmt_n(n)}: {rec['status']}: {rec.get('error')}")
            results.append(rec)
            write_json(out_path, state)

        # The largest N each config ran at, if the grid did not check it (its largest N was
        # skipped or failed): check it now with `flashbob run --check`, while time is left.
        for op in args.ops:
            for d in args.ds:
                for causal in (False, True):
                    ran = [r for r in results if (r["op"], r["d"], r["causal"]) == (op, d, causal)
                           and r["status"] in ("ok", "check-failed")]
                    if not ran:
                        continue
                    top = max(ran, key=lambda r: r["N"])
                    if (top["bench"].get("check") or top["N"] == smallest):
                        continue
                    est = 3.0 + 2.5 * top["bench"]["median_ms"] * 1e-3 + 6.0 * (top["N"] / 131072) * (d / 128)
                    left = remaining(args.deadline)
                    if est > left:
                        top["run_check"] = {"error": f"not run: time budget (estimated {est:.0f} s, {left:.0f} s left)"}
                        log(f"ours check {op} d={d} causal={int(causal)} N={fmt_n(top['N'])}: skipped (time)")
                        continue
                    top["run_check"] = run_check(args, logf, op, d, causal, top["N"],
                                                 timeout=max(30.0, min(left + 30.0, 300.0)))
                    log(f"ours check {op} d={d} causal={int(causal)} N={fmt_n(top['N'])}: "
                        f"{check_summary(top['run_check'])} (flashbob run --check)")
                    write_json(out_path, state)
    write_json(out_path, state)


def check_summary(chk):
    if not chk:
        return "-"
    if "passed" not in chk:
        return f"not checked: {chk.get('error', '?')}"
    errs = ", ".join(f"{k} {v:.2e}" if isinstance(v, (int, float)) else f"{k} {v}"
                     for k, v in (chk.get("rel_l2") or {}).items())
    return f"{'PASS' if chk['passed'] else 'FAIL'} ({errs})"


# ---- phase: torch (imported only here) -------------------------------------------------------

def torch_setup():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def torch_measure(torch, fn, flush, marks=1, budget_s=TIME_BUDGET_S, warmup=1):
    """fn(events) runs once, recording events[1..marks-1] itself at its internal boundaries.
    Returns, per interval from the start event, the median ms over the timed runs, and the runs."""
    for _ in range(warmup):
        fn(None)
    torch.cuda.synchronize()
    runs = []
    t0 = time.perf_counter()
    while len(runs) < MAX_ITERS and (len(runs) < 2 or time.perf_counter() - t0 < budget_s):
        flush()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(marks + 1)]
        ev[0].record()
        fn(ev)
        ev[-1].record()
        ev[-1].synchronize()
        runs.append([ev[0].elapsed_time(e) for e in ev[1:]])
    medians = [statistics.median(r[i] for r in runs) for i in range(marks)]
    return medians, runs


def reference_attention(torch, q, k, v, causal, mask):
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def is_oom(torch, e):
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()


def tried_alloc(e):
    """The allocation PyTorch's OOM message names ("Tried to allocate 64.00 GiB")."""
    m = re.search(r"Tried to allocate ([0-9.]+ [KMGT]?i?B)", str(e))
    return m.group(1) if m else None


def short(e, limit=300):
    text = f"{type(e).__module__}.{type(e).__name__}: {e}".replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def run_torch_ceiling(args):
    torch = torch_setup()
    rec = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "cuda": torch.version.cuda}
    try:
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            a @ b
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        flops = 2 * 8192 ** 3
        rec.update(best_ms=min(times), median_ms=statistics.median(times),
                   best_tflops=flops / (min(times) * 1e-3) / 1e12,
                   median_tflops=flops / (statistics.median(times) * 1e-3) / 1e12, status="ok")
        log(f"torch ceiling: bf16 matmul 8192^3 best {rec['best_tflops']:.1f} TFLOP/s, median "
            f"{rec['median_tflops']:.1f} (torch {torch.__version__}, {rec['device']})")
    except Exception as e:  # recorded, never fatal
        rec.update(status="failed", error=short(e))
        log(f"torch ceiling failed: {rec['error']}")
    write_json(os.path.join(args.out, "torch-ceiling.json"), rec)


def run_torch(args):
    torch = torch_setup()
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out_path = os.path.join(args.out, "torch.json")
    state = {"torch": torch.__version__, "cuda": torch.version.cuda,
             "device": torch.cuda.get_device_name(0), "bob": [], "sdpa": []}
    flush_buf = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    counter = [0]

    def flush():
        counter[0] = (counter[0] + 1) & 0xFF
        flush_buf.fill_(counter[0])

    masks = {}
    prev_ms = {}

    def inputs(n, d, names, grad):
        g = torch.Generator(device="cuda").manual_seed(n * 1000 + d)
        out = {}
        for name in names:
            t = torch.randn(BATCH, HEADS, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
            out[name] = t.requires_grad_(name in grad)
        return out

    def mask_for(n, causal):
        if not causal:
            return None
        if n not in masks:
            masks.clear()
            masks[n] = torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1)
        return masks[n]

    def budget_ok(kind, d, causal, n, rec):
        est = 2.0
        p = prev_ms.get((kind, d, causal))
        if p:
            est = 1.0 + 4 * p[1] * 1e-3 * (n / p[0]) ** 2
        left = remaining(args.deadline)
        if est > left:
            rec.update(status="skipped", error=f"time budget: estimated {est:.0f} s, {left:.0f} s left")
            return False
        return True

    for n in args.ns:
        for d in args.ds:
            for causal in (False, True):
                # (a) exact BoB: eager double backward through plain attention.
                rec = {"kind": "bob-eager", "d": d, "causal": causal, "N": n, "M": n, "heads": HEADS}
                if budget_ok("bob", d, causal, n, rec):
                    x = None
                    try:
                        torch.cuda.empty_cache()
                        base = torch.cuda.memory_allocated()
                        torch.cuda.reset_peak_memory_stats()
                        x = inputs(n, d, ["q", "k", "v", "do", "uq", "uk", "uv"], {"q", "k", "v", "do"})
                        mask = mask_for(n, causal)

                        def step(ev):
                            out = reference_attention(torch, x["q"], x["k"], x["v"], causal, mask)
                            dq, dk, dv = torch.autograd.grad(out, (x["q"], x["k"], x["v"]), x["do"],
                                                             create_graph=True)
                            if ev:
                                ev[1].record()
                            torch.autograd.grad((dq, dk, dv), (x["q"], x["k"], x["v"], x["do"]),
                                                (x["uq"], x["uk"], x["uv"]))

                        (first_ms, whole_ms), runs = torch_measure(torch, step, flush, marks=2)
                        second_ms = statistics.median(r[1] - r[0] for r in runs)
                        rec.update(status="ok", whole_ms=whole_ms, first_order_ms=first_ms,
                                   second_grad_ms=second_ms, iters=len(runs), runs_ms=runs,
                                   peak_bytes=torch.cuda.max_memory_allocated() - base,
                                   tflops_second=canonical_flops("bob", n, n, d, causal) / (second_ms * 1e-3) / 1e12,
                                   tflops_whole=(canonical_flops("fwd", n, n, d, causal) + canonical_flops("bwd", n, n, d, causal)
                                                 + canonical_flops("bob", n, n, d, causal)) / (whole_ms * 1e-3) / 1e12)
                        prev_ms[("bob", d, causal)] = (n, whole_ms)
                    except Exception as e:
                        if is_oom(torch, e):
                            rec.update(status="OOM", error=short(e, 200), tried_alloc=tried_alloc(e),
                                       peak_bytes=torch.cuda.max_memory_allocated() - base)
                        else:
                            rec.update(status="failed", error=short(e))
                    finally:
                        x = None
                        torch.cuda.empty_cache()
                state["bob"].append(rec)
                log(f"torch BoB eager d={d} causal={int(causal)} N={fmt_n(n)}: {rec['status']} "
                    + (f"whole {rec['whole_ms']:.2f} ms, 2nd grad {rec['second_grad_ms']:.2f} ms, "
                       f"peak {rec['peak_bytes'] / 2**30:.2f} GiB" if rec["status"] == "ok" else rec.get("error", "")))
                write_json(out_path, state)

                # (b) SDPA, its flash (FlashAttention-2) and cuDNN backends: forward, backward.
                for backend_name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                              ("flash", SDPBackend.FLASH_ATTENTION)):
                    kind = f"sdpa-{backend_name}"
                    rec = {"kind": kind, "d": d, "causal": causal, "N": n, "M": n, "heads": HEADS}
                    if budget_ok(kind, d, causal, n, rec):
                        x = out = None
                        try:
                            torch.cuda.empty_cache()
                            base = torch.cuda.memory_allocated()
                            torch.cuda.reset_peak_memory_stats()
                            x = inputs(n, d, ["q", "k", "v", "do"], {"q", "k", "v"})
                            with sdpa_kernel(backend):
                                def fwd(ev):
                                    F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=causal)

                                (fwd_ms,), fruns = torch_measure(torch, fwd, flush)
                                out = F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=causal)

                                def bwd(ev):
                                    torch.autograd.grad(out, (x["q"], x["k"], x["v"]), x["do"], retain_graph=True)

                                (bwd_ms,), bruns = torch_measure(torch, bwd, flush)
                            rec.update(status="ok", fwd_ms=fwd_ms, bwd_ms=bwd_ms, fwd_iters=len(fruns),
                                       bwd_iters=len(bruns),
                                       fwd_tflops=canonical_flops("fwd", n, n, d, causal) / (fwd_ms * 1e-3) / 1e12,
                                       bwd_tflops=canonical_flops("bwd", n, n, d, causal) / (bwd_ms * 1e-3) / 1e12,
                                       peak_bytes=torch.cuda.max_memory_allocated() - base)
                            prev_ms[(kind, d, causal)] = (n, fwd_ms + bwd_ms)
                        except Exception as e:
                            rec.update(status="OOM" if is_oom(torch, e) else "failed", error=short(e))
                            if is_oom(torch, e):
                                rec["tried_alloc"] = tried_alloc(e)
                        finally:
                            x = out = None
                            torch.cuda.empty_cache()
                    state["sdpa"].append(rec)
                    log(f"torch SDPA {backend_name} d={d} causal={int(causal)} N={fmt_n(n)}: {rec['status']} "
                        + (f"fwd {rec['fwd_ms']:.3f} ms, bwd {rec['bwd_ms']:.3f} ms" if rec["status"] == "ok"
                           else rec.get("error", "")))
                    write_json(out_path, state)
    write_json(out_path, state)


def run_compile_probe(args):
    """torch.compile on the double backward, one small shape: what happens (expected: refused)."""
    torch = torch_setup()
    n, d = 1024, 64
    res = {"shape": f"batch {BATCH}, heads {HEADS}, N = M = {n}, d = {d}, bf16, not causal",
           "torch": torch.__version__}
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda grad: torch.randn(BATCH, HEADS, n, d, device="cuda", dtype=torch.bfloat16,
                                  generator=g).requires_grad_(grad)
    q, k, v, do = mk(True), mk(True), mk(True), mk(True)
    uq, uk, uv = mk(False), mk(False), mk(False)

    def attn(q, k, v):
        return reference_attention(torch, q, k, v, False, None)

    def second_order(q, k, v, do, uq, uk, uv):
        out = attn(q, k, v)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), do, create_graph=True)
        return torch.autograd.grad((dq, dk, dv), (q, k, v, do), (uq, uk, uv))

    attempts = [
        ("torch.compile(attention), then eager double backward through it",
         lambda: second_order_with(torch.compile(attn))),
        ("torch.compile(whole second-order step, fullgraph=True)",
         lambda: torch.compile(second_order, fullgraph=True)(q, k, v, do, uq, uk, uv)),
    ]

    def second_order_with(f):
        out = f(q, k, v)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), do, create_graph=True)
        return torch.autograd.grad((dq, dk, dv), (q, k, v, do), (uq, uk, uv))

    res["attempts"] = []
    for name, fn in attempts:
        t = time.time()
        entry = {"what": name, "status": "killed (out of time while compiling or running)"}
        res["attempts"].append(entry)
        write_json(os.path.join(args.out, "compile-probe.json"), res)
        try:
            grads = fn()
            torch.cuda.synchronize()
            entry.update(status="ran", note=f"returned {len(grads)} gradients")
        except Exception as e:
            entry.update(status="refused", error_class=f"{type(e).__module__}.{type(e).__name__}",
                         message=str(e).strip().splitlines()[0][:300] if str(e).strip() else "")
        entry["seconds"] = round(time.time() - t, 1)
        log(f"compile probe: {name}: {entry['status']} {entry.get('error_class', '')} "
            f"{entry.get('message', entry.get('note', ''))} [{entry['seconds']} s]")
        write_json(os.path.join(args.out, "compile-probe.json"), res)
        torch._dynamo.reset()


# ---- phase: table (no GPU, no torch) -------------------------------------------------------

def gib(b):
    return f"{b / 2**30:.2f}" if isinstance(b, (int, float)) else "-"


def ms(x):
    if not isinstance(x, (int, float)):
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def ratio(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        r = a / b
        return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"
    return "-"


def pct_text(b, ceiling):
    if b.get("percent_of_ceiling") is not None:
        return f"{b['percent_of_ceiling']:.1f}"
    if ceiling:
        return f"{100 * b['tflops'] / ceiling:.1f}"
    return "-"


def ours_cell(rec):
    if rec is None:
        return None
    if rec.get("status") in ("ok", "check-failed"):
        return rec["bench"]
    return None


def status_text(rec):
    if rec is None:
        return "not run"
    s = rec.get("status", "?")
    e = rec.get("error")
    return f"{s}: {e}" if e else s


def row_check(rec):
    """The check of a grid record: its bench's own, else the `flashbob run --check` fill-in."""
    b = ours_cell(rec)
    if b and b.get("check"):
        return b["check"]
    rc = (rec or {}).get("run_check")
    if rc and "passed" in rc:
        return dict(rc, via="run")
    return None


def check_text(chk):
    if not chk:
        return "-"
    worst = [v for v in (chk.get("rel_l2") or {}).values()]
    worst_num = max((v for v in worst if isinstance(v, (int, float))), default=None)
    if any(not isinstance(v, (int, float)) for v in worst):
        worst_txt = "inf"
    else:
        worst_txt = f"{worst_num:.1e}" if worst_num is not None else "-"
    via = ", run" if chk.get("via") == "run" else ""
    return f"{'PASS' if chk.get('passed') else '**FAIL**'} {worst_txt} ({chk.get('rows')} rows{via})"


# The performance targets, each against this table's own figures: forward and backward no slower than
# SDPA's cuDNN backend from N = 4K (and at least 0.9x of it from 1K); BoB at 550 TFLOP/s at
# d = 128 and 480 at d = 64 from N = 16K; BoB at 128K within 3% of 16K.
SDPA_FROM_N, SDPA_RATIO = 4096, 1.0
SDPA_ANY_N, SDPA_ANY_RATIO = 1024, 0.9
BOB_FROM_N, BOB_TFLOPS = 16384, {128: 550.0, 64: 480.0}
BOB_LONG_N, BOB_LONG_LOSS = 131072, 0.03
# Where the gaps come from and what was tried: kept in one place, a section of
# docs/performance.md, which the table prints under its targets.
DOC_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                        "performance.md")
GAPS_HEADING = "## The targets' gaps, what explains each"


def gaps_section(doc_path=DOC_PATH):
    """The body of docs/performance.md's section on the targets' gaps (None when it is absent)."""
    try:
        with open(doc_path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    start = next((i for i, l in enumerate(lines) if l.startswith(GAPS_HEADING)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start + 1:end]).strip()


def read_profile(out_dir):
    """The kernels' rows of kernel-profile.sh's log under out_dir ([] when it did not run)."""
    path = os.path.join(out_dir, "profile.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return profile_table.parse(f)


def targets_section(o, ts, out_dir, doc_path=DOC_PATH):
    """Each target with the measured figure it is judged on, what explains the gaps and what was
    tried (docs/performance.md's section), then the kernels' profile."""
    L = ["## Targets: met or the measured gap", ""]
    L.append("| target | shape | measured (worst over the table's N) | met |")
    L.append("|---|---|---|---|")
    ds = sorted({k[1] for k in o})
    for op in ("fwd", "bwd"):
        for d in ds:
            for c in (False, True):
                pts = []
                for (op2, d2, c2, n), r in o.items():
                    b = ours_cell(r)
                    t = ts.get(("sdpa-cudnn", d2, c2, n))
                    if op2 == op and d2 == d and c2 == c and b and t and t.get("status") == "ok":
                        pts.append((n, t[f"{op}_ms"] / b["median_ms"]))
                for lo, need in ((SDPA_FROM_N, SDPA_RATIO), (SDPA_ANY_N, SDPA_ANY_RATIO)):
                    sel = [(r, n) for n, r in pts if n >= lo]
                    shape = f"{op} d={d}{' causal' if c else ''}, N >= {fmt_n(lo)}"
                    if not sel:
                        L.append(f"| {op} cuDNN/ours >= {need:.1f} | {shape} | not measured | - |")
                        continue
                    worst, at = min(sel)
                    met = "yes" if worst >= need else f"**no** (gap {need - worst:.2f})"
                    L.append(f"| {op} cuDNN/ours >= {need:.1f} | {shape} | {worst:.2f}x at N = {fmt_n(at)} "
                             f"(best {max(sel)[0]:.2f}x) | {met} |")
    for d in ds:
        need = BOB_TFLOPS.get(d)
        for c in (False, True):
            recs = {n: r for (op2, d2, c2, n), r in o.items() if op2 == "bob" and d2 == d and c2 == c}
            cells = {n: ours_cell(r) for n, r in recs.items()}
            shape = f"bob d={d}{' causal' if c else ''}"
            sel = [(b["tflops"], n) for n, b in cells.items() if b and n >= BOB_FROM_N]
            if need is not None:
                if sel:
                    worst, at = min(sel)
                    met = "yes" if worst >= need else f"**no** (gap {need - worst:.0f} TFLOP/s)"
                    L.append(f"| BoB >= {need:.0f} TFLOP/s | {shape}, N >= {fmt_n(BOB_FROM_N)} | "
                             f"{worst:.1f} at N = {fmt_n(at)} | {met} |")
                else:
                    L.append(f"| BoB >= {need:.0f} TFLOP/s | {shape}, N >= {fmt_n(BOB_FROM_N)} | not measured | - |")
            short, long_ = cells.get(BOB_FROM_N), cells.get(BOB_LONG_N)
            if short and long_:
                loss = 1 - long_["tflops"] / short["tflops"]
                met = "yes" if loss <= BOB_LONG_LOSS else f"**no** ({loss * 100:.1f}% slower)"
                clocks = [(n, recs[n].get("clocks")) for n in (BOB_LONG_N, BOB_FROM_N)]
                during = "; ".join(f"{fmt_n(n)}: {gpu_clocks.describe(k)}" for n, k in clocks if k)
                L.append(f"| BoB at {fmt_n(BOB_LONG_N)} within {BOB_LONG_LOSS * 100:.0f}% of "
                         f"{fmt_n(BOB_FROM_N)} | {shape} | {long_['tflops']:.1f} vs {short['tflops']:.1f}"
                         f"{f' ({during})' if during else ''} | {met} |")
            else:
                L.append(f"| BoB at {fmt_n(BOB_LONG_N)} within {BOB_LONG_LOSS * 100:.0f}% of "
                         f"{fmt_n(BOB_FROM_N)} | {shape} | not measured in this call | - |")
    L.append("")
    if any(r.get("clocks") for r in o.values()):
        L.append("In parentheses: the GPU during each of those calls (nvidia-smi every 100 ms through "
                 "our phase; of the samples between the call's start and end, those where a kernel ran "
                 f"through at least {gpu_clocks.BUSY_PERCENT:.0f}% of the period; `bench/gpu_clocks.py`). "
                 "The power-cap flag shows in short calls too; what it costs grows with how long a "
                 "call holds the board at its limit: through a call of seconds the SM clock settles "
                 "lower than through one of tens of milliseconds. The watts are nvidia-smi's "
                 "power.draw, an average over the last second, so a call shorter than that shows "
                 "less than it drew (docs/performance.md, \"The targets' gaps, what explains each\").")
        L.append("")
    L.append("The HVP step end to end is the BoB table's *ours fwd+bwd+BoB* against *torch whole*.")
    L.append("")
    L.append("### What explains each gap, and what was tried")
    L.append("")
    gaps = gaps_section(doc_path)
    L.append(f"From docs/performance.md (\"{GAPS_HEADING[3:]}\"), as committed when this table "
             "was made; its figures are those of the table it names."
             if gaps else f"docs/performance.md has no section \"{GAPS_HEADING[3:]}\".")
    L.append("")
    if gaps:
        L.append(gaps)
        L.append("")
    L.append("### Where the kernels spend their time (Nsight Compute, 16 heads x 16K, not causal)")
    L.append("")
    rows = read_profile(out_dir)
    if rows:
        L.append("`bash scripts/device/kernel-profile.sh 128 64` in the same call, clocks left alone "
                 "(the SM clock under ncu is in the GHz column). *tensor %*: elapsed cycles the "
                 "tensor pipe (wgmma) was busy, the kernel's share of its matmul peak; *XU %*: the "
                 "special-function pipe (exp2) against its peak.")
        L.append("")
        L.append(profile_table.table(rows))
    else:
        L.append("Not run in this call (no profile.log): "
                 "`bash scripts/device/run-gpu.sh bash scripts/device/kernel-profile.sh`, then "
                 "`python3 bench/profile_table.py LOG`.")
    L.append("")
    return L


def make_table(args):
    ours = read_json(os.path.join(args.out, "ours.json"), {}) or {}
    tor = read_json(os.path.join(args.out, "torch.json"), {}) or {}
    tceil = read_json(os.path.join(args.out, "torch-ceiling.json"), {}) or {}
    probe = read_json(os.path.join(args.out, "compile-probe.json"), {}) or {}
    env = read_json(os.path.join(args.out, "env.json"), {}) or {}
    # The GPU's clock and power during each of our calls (gpu-samples.csv, when sampled).
    samples = gpu_clocks.read(os.path.join(args.out, gpu_clocks.SAMPLES_FILE))
    for r in ours.get("results", []):
        if samples and "t0" in r and "t1" in r:
            r["clocks"] = gpu_clocks.summary(samples, r["t0"], r["t1"])
    raw = {"env": env, "ours": ours, "torch": tor, "torch_ceiling": tceil, "compile_probe": probe,
           "profile": read_profile(args.out)}
    write_json(os.path.join(args.out, "perf-raw.json"), raw)

    o = {(r["op"], r["d"], r["causal"], r["N"]): r for r in ours.get("results", [])}
    tb = {(r["d"], r["causal"], r["N"]): r for r in tor.get("bob", [])}
    # SDPA records by backend ("sdpa-cudnn", "sdpa-flash"; older runs wrote flash alone)
    ts = {(r.get("kind", "sdpa-flash"), r["d"], r["causal"], r["N"]): r for r in tor.get("sdpa", [])}
    keys = sorted({(d, c, n) for (_, d, c, n) in o} | set(tb) | {k[1:] for k in ts},
                  key=lambda k: (k[0], k[1], k[2]))

    ceiling = ours.get("ceiling_tflops")
    dev = ours.get("device") or {}
    L = []
    L.append("# FlashBoB vs PyTorch on one GPU: forward, backward, exact BoB")
    L.append("")
    L.append(f"- GPU: {dev.get('name', tor.get('device', tceil.get('device', '?')))}"
             f" ({dev.get('sm', '?')}, {dev.get('sms', '?')} SMs), CUDA driver "
             f"{(dev.get('driver_version') or 0) // 1000}.{((dev.get('driver_version') or 0) % 1000) // 10}; "
             f"torch {tor.get('torch', tceil.get('torch', '?'))} (CUDA {tor.get('cuda', tceil.get('cuda', '?'))}); "
             f"{env.get('date', time.strftime('%Y-%m-%d'))}.")
    L.append(f"- Command: {env.get('command', 'python3 bench/compare_torch.py {ceiling,ours,torch,compile-probe,table}')}"
             f" (git {env.get('git', '?')}).")
    L.append(f"- Problem: batch {BATCH}, {HEADS} heads, N = M, bf16 inputs, scale 1/sqrt(d).")
    cs = ours.get("ceiling_source") or "none"
    L.append(f"- Ceiling (dense bf16 matmul 8192^3, f32 accumulate): "
             + (f"**{ceiling:.1f} TFLOP/s** ({cs})" if ceiling else f"not measured ({cs})")
             + (f"; PyTorch's matmul in the same call: {tceil['best_tflops']:.1f} best, "
                f"{tceil['median_tflops']:.1f} median" if tceil.get("status") == "ok" else "")
             + ".")
    if ours.get("copy_tbs"):
        L.append(f"- Device-to-device copy (cuMemcpyDtoD, read + write) in the first bench call: "
                 f"{ours['copy_tbs']:.2f} TB/s (HBM nominal {HBM_NOMINAL_TBS} TB/s).")
    L.append("- Timing: CUDA events, L2 flushed before each timed run (256 MiB written, untimed); "
             "warm-up, then runs until 1.5 s were spent or 10 runs, at least 2; median. Ours: "
             "`flashbob bench` (its first call compiles or loads the kernels and runs once; an "
             "extra warm-up run only when one run takes < 2 s).")
    L.append("- TFLOP/s: canonical counts per head, halved for causal: forward 4 N M d, backward "
             "10 N M d, BoB 36 N M d (docs/bob-math.md); % ceiling = TFLOP/s over the ceiling above.")
    L.append("- Memory: ours = device memory in use after the run over the process baseline "
             "(cuMemGetInfo; all inputs, outputs and O(N) workspace; the kernels allocate nothing); "
             "torch = torch.cuda.max_memory_allocated over the run, inputs included.")
    L.append("- Check: `flashbob bench --check` (the runner of `flashbob run --check`): the last R "
             "query rows of head (0,0) against the float64 oracle (every row and the key-major "
             "outputs at N <= 2K); bound 5e-3 relative L2; worst output shown.")
    L.append("")

    # Table 1: BoB.
    L.append("## Exact BoB: ours vs PyTorch eager double backward (plain matmul/softmax attention)")
    L.append("")
    L.append("PyTorch: out = softmax(s Q K^T) V; dQ, dK, dV = grad(<dO, out>, create_graph=True); "
             "then grad(<(dQ,dK,dV), (uQ,uK,uV)>) w.r.t. Q, K, V, dO. *2nd grad* times only the last "
             "call (comparable to our BoB op, which gets O and L); *whole* times all three steps "
             "(comparable to our fwd + bwd + BoB, the sum of our three rows).")
    L.append("")
    L.append("| d | causal | N | ours BoB ms | TFLOP/s | % ceiling | ours peak GiB | torch 2nd grad ms | "
             "ratio torch/ours | ours fwd+bwd+BoB ms | torch whole ms | ratio whole/ours | torch peak GiB | check |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    failures = []
    for d, c, n in keys:
        r = o.get(("bob", d, c, n))
        b = ours_cell(r)
        t = tb.get((d, c, n))
        if r is None and t is None:
            continue
        if b:
            ours_ms, tf = b["median_ms"], b["tflops"]
            pct = pct_text(b, ceiling)
            peak = gib(b.get("device_memory_used_bytes"))
        else:
            ours_ms, tf, pct, peak = None, None, "-", "-"
            if r is not None:
                failures.append(f"ours bob d={d} causal={c} N={n}: {status_text(r)}")
        e2e = None
        parts = [ours_cell(o.get((op, d, c, n))) for op in ("fwd", "bwd", "bob")]
        if all(parts):
            e2e = sum(p["median_ms"] for p in parts)
        if t and t.get("status") == "ok":
            t2, tw, tpk = t["second_grad_ms"], t["whole_ms"], gib(t.get("peak_bytes"))
            t2s, tws = ms(t2), ms(tw)
        else:
            t2 = tw = None
            tpk = f"{gib(t.get('peak_bytes'))} at OOM" if t and t.get("status") == "OOM" else "-"
            if t is None:
                t2s = tws = "not run"
            elif t.get("status") == "OOM":
                t2s = tws = f"OOM (tried {t.get('tried_alloc') or '?'})"
            else:
                t2s = tws = t.get("status", "?")
                failures.append(f"torch bob-eager d={d} causal={c} N={n}: {status_text(t)}")
        cells = [str(d), "yes" if c else "no", fmt_n(n)]
        if b:
            cells += [ms(ours_ms), f"{tf:.1f}", pct, peak]
        else:
            cells += [status_text(r).split(":")[0], "-", "-", "-"]
        cells += [t2s, ratio(t2, ours_ms), ms(e2e), tws, ratio(tw, e2e), tpk, check_text(row_check(r))]
        L.append("| " + " | ".join(cells) + " |")
    L.append("")

    # Table 2: fwd / bwd vs SDPA's cuDNN (FlashAttention-3 class) and flash (FlashAttention-2).
    L.append("## Forward and backward: ours vs SDPA's cuDNN and flash backends")
    L.append("")
    L.append("Ratios are SDPA's time over ours: above 1, ours is faster. cuDNN is the fastest "
             "attention on this machine (FlashAttention-3 class); flash is FlashAttention-2.")
    L.append("")
    L.append("| op | d | causal | N | ours ms | TFLOP/s | % ceiling | ours peak GiB | cuDNN ms | cuDNN TFLOP/s | "
             "cuDNN/ours | flash ms | flash TFLOP/s | flash/ours | check |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def sdpa_cells(op, kind, d, c, n, ours_ms):
        t = ts.get((kind, d, c, n))
        if t and t.get("status") == "ok":
            return [ms(t[f"{op}_ms"]), f"{t[f'{op}_tflops']:.1f}", ratio(t[f"{op}_ms"], ours_ms)]
        if t is not None and t.get("status") != "OOM" and op == "fwd":
            failures.append(f"torch {kind} d={d} causal={c} N={n}: {status_text(t)}")
        text = "not run" if t is None else (f"OOM (tried {t.get('tried_alloc') or '?'})"
                                            if t.get("status") == "OOM" else t.get("status", "?"))
        return [text, "-", "-"]

    for op in ("fwd", "bwd"):
        for d, c, n in keys:
            r = o.get((op, d, c, n))
            if r is None and not any((kind, d, c, n) in ts for kind in ("sdpa-cudnn", "sdpa-flash")):
                continue
            b = ours_cell(r)
            cells = [op, str(d), "yes" if c else "no", fmt_n(n)]
            if b:
                cells += [ms(b["median_ms"]), f"{b['tflops']:.1f}", pct_text(b, ceiling),
                          gib(b.get("device_memory_used_bytes"))]
            else:
                if r is not None:
                    failures.append(f"ours {op} d={d} causal={c} N={n}: {status_text(r)}")
                cells += [status_text(r).split(":")[0], "-", "-", "-"]
            ours_ms = b["median_ms"] if b else None
            for kind in ("sdpa-cudnn", "sdpa-flash"):
                cells += sdpa_cells(op, kind, d, c, n, ours_ms)
            cells.append(check_text(row_check(r)) if b else "-")
            L.append("| " + " | ".join(cells) + " |")
    L.append("")

    # Checks.
    checked = [(k, row_check(r)) for k, r in sorted(o.items()) if row_check(r)]
    passed = sum(1 for _, c in checked if c.get("passed"))
    L.append(f"## Correctness: {passed} of {len(checked)} checked runs pass")
    L.append("")
    L.append("Checked: " + ", ".join(f"{op} d={d}{' causal' if c else ''} N={fmt_n(n)}"
                                     for (op, d, c, n), _ in checked) + ".")
    L.append("")
    bad = [(k, c) for k, c in checked if not c.get("passed")]
    for (op, d, c, n), chk in bad:
        L.append(f"- FAIL {op} d={d} causal={c} N={n}: {json.dumps(chk.get('rel_l2'))}")
    for k, r in sorted(o.items()):
        rc = r.get("run_check")
        if rc and "passed" not in rc:
            failures.append(f"check of ours {k[0]} d={k[1]} causal={k[2]} N={k[3]}: {rc.get('error')}")
    if not bad and checked:
        L.append("Every checked output is within its bound (per-output errors in perf-raw.json).")
    L.append("")

    L += targets_section(o, ts, args.out)

    # torch.compile.
    L.append("## torch.compile and double backward")
    L.append("")
    if probe.get("attempts"):
        L.append(f"Shape: {probe.get('shape')}.")
        L.append("")
        for a in probe["attempts"]:
            if a.get("status") == "refused":
                L.append(f"- {a['what']}: **refused** after {a.get('seconds')} s: `{a.get('error_class')}`: "
                         f"{a.get('message', '')}")
            else:
                extra = ", ".join(x for x in (a.get("note", ""), f"{a['seconds']} s" if "seconds" in a else "") if x)
                L.append(f"- {a['what']}: {a.get('status')}" + (f" ({extra})" if extra else ""))
    else:
        L.append("Not run (no compile-probe.json: out of time or failed; see the phase's output).")
    L.append("")

    if failures:
        L.append("## Failures and skips")
        L.append("")
        for f in failures:
            L.append(f"- {f}")
        L.append("")
    text = "\n".join(L)
    with open(os.path.join(args.out, "perf-table.md"), "w") as f:
        f.write(text)
    print(text, flush=True)


# ---- main ----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["ceiling", "ours", "torch", "compile-probe", "table"])
    ap.add_argument("--out", required=True, help="directory for JSON, logs and the table")
    ap.add_argument("--flashbob", default=".device/bin/flashbob")
    ap.add_argument("--deadline", type=float, default=0,
                    help="epoch seconds by which the phase must end (0: one hour from now)")
    ap.add_argument("--ceiling-tflops", type=float, default=None,
                    help="pass this ceiling to every bench call instead of the first call's cuBLAS one")
    ap.add_argument("--ns", default=",".join(map(str, DEFAULT_NS)))
    ap.add_argument("--ds", default=",".join(map(str, DEFAULT_DS)))
    ap.add_argument("--ops", default=",".join(OPS))
    args = ap.parse_args()
    args.ns = [int(x) for x in args.ns.split(",") if x]
    args.ds = [int(x) for x in args.ds.split(",") if x]
    args.ops = [x for x in args.ops.split(",") if x]
    if not args.deadline:
        args.deadline = time.time() + 3600
    os.makedirs(args.out, exist_ok=True)
    try:
        {"ceiling": run_torch_ceiling, "ours": run_ours, "torch": run_torch,
         "compile-probe": run_compile_probe, "table": make_table}[args.phase](args)
    except Exception:
        log(f"phase {args.phase} failed:\n{traceback.format_exc()}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
