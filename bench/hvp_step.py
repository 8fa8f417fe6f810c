"""One Hessian-vector-product step end to end through the PyTorch op, against PyTorch eager on
plain matmul/softmax attention: out = attention(Q, K, V); dQ, dK, dV = grad(<dO, out>,
create_graph=True); then grad(<(dQ, dK, dV), (uQ, uK, uV)>) w.r.t. Q, K, V and dO: the forward,
the first backward and BoB, as a second-order method runs them (the perf table's "torch whole").

    python3 bench/hvp_step.py [--ns 1024,4096,16384] [--ds 64,128] [--heads 16]

Batch 1, bf16, N = M, causal and not. Each step: CUDA events, the L2 flushed before each timed
run (256 MiB written, untimed), one warm-up, then runs until 1.5 s were spent or 10, at least 2;
the median. Where eager fits, the four gradients of the two are compared (relative L2, float32
of the bf16 results) with float64 autograd on the same inputs at the smallest N, and with each
other everywhere. One JSON line per shape, then a markdown table on stdout.
"""

import argparse
import json
import statistics

import torch

import flashbob.torch as fb

FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
FLOPS_PER_PAIR = 4 + 10 + 36  # forward, backward, BoB (docs/bob-math.md), halved for causal


def eager(q, k, v, causal):
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[2]
        above = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(above, float("-inf"))
    return torch.softmax(s, -1) @ v


def ours(q, k, v, causal):
    return fb.attention(q, k, v, causal=causal)


def step(attn, x, causal):
    q, k, v, do, uq, uk, uv = x
    out = attn(q, k, v, causal)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), do, create_graph=True)
    return torch.autograd.grad((dq, dk, dv), (q, k, v, do), (uq, uk, uv))


def timed(fn):
    """Median ms of fn over runs with the L2 flushed before each."""
    fn()
    times = []
    while len(times) < 2 or (sum(times) < 1500 and len(times) < 10):
        FLUSH.fill_(len(times) & 0xFF)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def inputs(heads, n, d, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(n + d)
    x = [torch.randn(1, heads, n, d, device="cuda", generator=g).to(dtype) for _ in range(7)]
    for t in x[:4]:
        t.requires_grad_()
    return x


def measure(heads, n, d, causal, smallest):
    rec = {"heads": heads, "N": n, "d": d, "causal": causal}
    x = inputs(heads, n, d)
    flops = FLOPS_PER_PAIR * n * n * d * heads / (2 if causal else 1)
    rec["ours_ms"] = timed(lambda: step(ours, x, causal))
    rec["ours_tflops"] = flops / rec["ours_ms"] / 1e9
    got = step(ours, x, causal)
    try:
        rec["eager_ms"] = timed(lambda: step(eager, x, causal))
        want = step(eager, x, causal)
        rec["ours_vs_eager"] = max(rel(a, b) for a, b in zip(got, want))
        if n == smallest:
            x64 = [t.detach().double().requires_grad_(t.requires_grad) for t in x]
            exact = step(eager, x64, causal)
            rec["ours_vs_float64"] = max(rel(a, b) for a, b in zip(got, exact))
            rec["eager_vs_float64"] = max(rel(a, b) for a, b in zip(want, exact))
    except torch.OutOfMemoryError as e:
        rec["eager"] = "OOM: " + str(e).split("\n")[0][:120]
    finally:
        torch.cuda.empty_cache()
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="1024,4096,16384")
    ap.add_argument("--ds", default="64,128")
    ap.add_argument("--heads", type=int, default=16)
    args = ap.parse_args()
    ns = [int(n) for n in args.ns.split(",")]
    rows = []
    for d in (int(d) for d in args.ds.split(",")):
        for causal in (False, True):
            for n in ns:
                rec = measure(args.heads, n, d, causal, min(ns))
                print(json.dumps(rec), flush=True)
                rows.append(rec)
    print(f"\n| d | causal | N | ours HVP step ms | TFLOP/s | eager ms | eager/ours | "
          f"ours vs eager | ours vs float64 | eager vs float64 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda r, key, spec: format(r[key], spec) if key in r else "-"  # noqa: E731
    for r in rows:
        eager_ms = fmt(r, "eager_ms", ".2f") if "eager_ms" in r else r.get("eager", "-")
        speedup = f"{r['eager_ms'] / r['ours_ms']:.2f}x" if "eager_ms" in r else "-"
        print(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['N']} | {r['ours_ms']:.2f} | "
              f"{r['ours_tflops']:.0f} | {eager_ms} | {speedup} | {fmt(r, 'ours_vs_eager', '.1e')} | "
              f"{fmt(r, 'ours_vs_float64', '.1e')} | {fmt(r, 'eager_vs_float64', '.1e')} |")


if __name__ == "__main__":
    main()
