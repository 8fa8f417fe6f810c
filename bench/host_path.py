"""Host time of the PyTorch front end: what a call of flashbob.torch costs the CPU, against SDPA
and against torch.func over plain eager attention, and the HVP step against its kernels.

Three parts, all in one process on one GPU:

calls      back-to-back calls on a tiny problem (1 x 1 x 128 x 64 bf16, a few microseconds of
           GPU work), host time per call: the forward (fb.attention and the operator
           torch.ops.flashbob.forward) against SDPA, the forward and backward against SDPA's,
           torch.func.jvp of fb.attention against torch.func.jvp of eager attention, the HVP step
           (forward, grad with create_graph, grad) against the same step over eager attention.
layers     the same forward taken apart: each piece of the call path timed alone (checks, the
           autograd.Function, output allocation, the device guard, the stream, the C structs,
           the C call and launch), so that the sum says where the time goes.
steps      the HVP step at N = 1K and 2K (16 heads; d = 64 and 128; causal and not): wall time
           per step, back to back, against the sum of the GPU times of the kernels one step runs
           (torch.profiler), and the host time one step takes to issue.

    python3 bench/host_path.py [--parts calls,layers,steps] [--rounds 5] [--json FILE]
                               [--profile "forward + backward"]

--profile NAME runs cProfile over 200 calls of the named row of the first part (its FlashBoB
side) and prints the functions by their own time and by cumulative time.

Each figure is the median over rounds of the mean over a batch of calls; the spread (min-max
over rounds) is printed beside it.
"""

import argparse
import inspect
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F

import flashbob
import flashbob.torch as fb
from flashbob import _capi


def per_call(f, calls, rounds, warmup=50):
    """Median and (min, max) over `rounds` of the host time per call of f(), in microseconds,
    calls back to back and the stream drained after each batch (so queued GPU work cannot
    hide in the next batch)."""
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times), (min(times), max(times))


def eager_attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(d)) v in plain torch ops: what torch.func differentiates without
    FlashBoB (the floor for torch.func's own cost)."""
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n, m = s.shape[-2], s.shape[-1]
        mask = torch.ones(n, m, dtype=torch.bool, device=q.device).tril(m - n)
        s = s.masked_fill(~mask, float("-inf"))
    return (s.softmax(-1) @ v.float()).to(q.dtype)


def tiny(d=64, grad=False):
    return [torch.randn(1, 1, 128, d, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
            for _ in range(3)]


def hvp_step(attn, q, k, v, w, u):
    o = attn(q, k, v)
    g, = torch.autograd.grad((o.float() * w).sum(), q, create_graph=True)
    hvp, = torch.autograd.grad(g, q, u)
    return hvp


def call_rows():
    """(name, FlashBoB's call, the reference's call, the reference's name, calls per batch)."""
    q, k, v = tiny()
    qg, kg, vg = tiny(grad=True)
    do = torch.randn_like(qg)
    tq, tk, tv = (torch.randn_like(x) for x in (qg, kg, vg))
    w, u = torch.randn_like(qg, dtype=torch.float32), torch.randn_like(qg)

    def fwd_bwd(attn):
        def f():
            attn(qg, kg, vg).backward(do)
        return f

    rows = [
        ("forward", lambda: fb.attention(q, k, v),
         lambda: F.scaled_dot_product_attention(q, k, v), "SDPA", 2000),
        ("forward, the operator", lambda: torch.ops.flashbob.forward(q, k, v, False, -1, -1, 0.0,
                                                                   None, None, 0, 0),
         lambda: F.scaled_dot_product_attention(q, k, v), "SDPA", 2000),
        ("forward + backward", fwd_bwd(fb.attention), fwd_bwd(F.scaled_dot_product_attention),
         "SDPA", 1000),
        ("torch.func.jvp", lambda: torch.func.jvp(fb.attention, (q, k, v), (tq, tk, tv)),
         lambda: torch.func.jvp(eager_attention, (q, k, v), (tq, tk, tv)),
         "torch.func.jvp of eager attention", 500),
        ("HVP step", lambda: hvp_step(fb.attention, qg, k, v, w, u),
         lambda: hvp_step(eager_attention, qg, k, v, w, u), "the step over eager attention", 500),
    ]
    return rows


def calls_part(rounds):
    out = []
    for name, ours, theirs, against, calls in call_rows():
        mine, mine_spread = per_call(ours, calls, rounds)
        ref, ref_spread = per_call(theirs, calls, rounds)
        out.append({"call": name, "flashbob_us": mine, "flashbob_spread_us": mine_spread,
                    "reference": against, "reference_us": ref, "reference_spread_us": ref_spread,
                    "ratio": mine / ref})
    return out


def profile_call(name, calls=200):
    import cProfile
    import io
    import pstats
    rows = {row[0]: row[1] for row in call_rows()}
    if name not in rows:
        raise SystemExit(f"--profile: no call named {name!r} (one of {sorted(rows)})")
    f = rows[name]
    for _ in range(50):
        f()
    torch.cuda.synchronize()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        f()
    torch.cuda.synchronize()
    profile.disable()
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(30)
        print(f"\n== cProfile of {calls} calls of {name!r}, by {order} time\n{out.getvalue()}")


def layers_part(rounds):
    """The forward's call path taken apart. Each row times one piece alone on the tiny problem;
    they do not add up exactly (Python's caches warm differently), but they rank the costs."""
    q, k, v = tiny()
    config = (False, -1, -1, 0.0, None, None, 0, 0)
    o, lse = fb.attention(q, k, v, return_lse=True)
    problem = fb._problem(q, k, *config)
    tensors = [fb._tensor(t) for t in (q, k, v, o)]
    stream = fb._stream(q)
    lib = _capi._library()

    class Plain(torch.autograd.Function):  # what any autograd.Function costs, doing nothing
        @staticmethod
        def forward(q, k, v, *config):  # two outputs, as the forward's O and L
            return q.new_empty(()), q.new_empty(())

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs[:3], *output)

        @staticmethod
        def backward(ctx, *grads):
            return (None,) * 11

    Plain.forward.__signature__ = inspect.signature(Plain.forward)  # as the package does

    def guard():
        with torch.cuda.device(q.device):
            pass

    qg = q.detach().requires_grad_()

    pieces = [
        ("the whole call: fb.attention", lambda: fb.attention(q, k, v)),
        ("SDPA, for scale", lambda: F.scaled_dot_product_attention(q, k, v)),
        ("argument checks (attention's, before the Function)",
         lambda: ([fb._check(t, n) for t, n in ((q, "q"), (k, "k"), (v, "v"))],
                  fb._check_shapes(q, k, v), fb._options.window((-1, -1)))),
        ("torch.compiler.is_compiling()", torch.compiler.is_compiling),
        ("an autograd.Function doing nothing (2 empty outputs), inputs without grad",
         lambda: Plain.apply(q, k, v, *config)),
        ("the same, q requiring grad", lambda: Plain.apply(qg, k, v, *config)),
        ("_direct(args): may the body run without the operator?",
         lambda: fb._direct((q, k, v, *config))),
        ("the operator's body alone (_forward_body)", lambda: fb._forward_body(q, k, v, *config)),
        ("_readable x3", lambda: [fb._readable(t) for t in (q, k, v)]),
        ("output allocation: O and L", lambda: (fb._empty(q), fb._rows(q))),
        ("torch.cuda.device(q.device) entered and left", guard),
        ("torch.cuda.current_stream(device).cuda_stream", lambda: fb._stream(q)),
        ("torch._C._cuda_getCurrentRawStream(index)",
         lambda: torch._C._cuda_getCurrentRawStream(q.device.index)),
        ("data_ptr() and stride() of 4 tensors",
         lambda: [(t.data_ptr(), t.stride()) for t in (q, k, v, o)]),
        ("the C problem struct (_problem)", lambda: fb._problem(q, k, *config)),
        ("4 C tensor structs (_tensor)", lambda: [fb._tensor(t) for t in (q, k, v, o)]),
        ("the C call with its launch (structs made)",
         lambda: lib.flashbob_forward(_capi.ctypes.byref(problem), *tensors, lse.data_ptr(),
                                      stream)),
    ]
    out = []
    for name, f in pieces:
        us, spread = per_call(f, 2000, rounds)
        out.append({"piece": name, "us": us, "spread_us": spread})
    return out


def profiled_kernel_us(f):
    """The summed GPU time of every kernel one call of f() runs (torch.profiler), microseconds."""
    f()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        f()
        torch.cuda.synchronize()
    total = 0.0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    return total


def steps_part(rounds):
    out = []
    for n in (1024, 2048):
        for d in (64, 128):
            for causal in (False, True):
                q, k, v = (torch.randn(1, 16, n, d, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
                q.requires_grad_()
                w, u = torch.randn_like(q, dtype=torch.float32), torch.randn_like(q)
                attn = lambda q, k, v: fb.attention(q, k, v, causal=causal)
                step = lambda: hvp_step(attn, q, k, v, w, u)
                wall, spread = per_call(step, 50, rounds, warmup=5)
                # Host time to issue one step while the GPU is idle: the step's Python and
                # launches, not its kernels (synchronized before, not after).
                issue = []
                for _ in range(20):
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    step()
                    issue.append((time.perf_counter() - start) * 1e6)
                torch.cuda.synchronize()
                kernels = profiled_kernel_us(step)
                out.append({"n": n, "d": d, "causal": causal, "wall_us": wall,
                            "wall_spread_us": spread, "kernels_us": kernels,
                            "issue_us": statistics.median(issue),
                            "over_kernels_us": wall - kernels})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="calls,layers,steps")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--profile", metavar="CALL", help="cProfile the named call instead")
    args = ap.parse_args()
    parts = args.parts.split(",")
    torch.cuda.init()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, flashbob "
          f"{flashbob.version()}")
    if args.profile:
        profile_call(args.profile)
        return
    results = {}
    if "calls" in parts:
        results["calls"] = calls_part(args.rounds)
        print("\n| call | flashbob us | against | its us | ratio |\n|---|---|---|---|---|")
        for r in results["calls"]:
            print(f"| {r['call']} | {r['flashbob_us']:.1f} ({r['flashbob_spread_us'][0]:.1f}-"
                  f"{r['flashbob_spread_us'][1]:.1f}) | {r['reference']} | "
                  f"{r['reference_us']:.1f} ({r['reference_spread_us'][0]:.1f}-"
                  f"{r['reference_spread_us'][1]:.1f}) | {r['ratio']:.2f}x |")
    if "layers" in parts:
        results["layers"] = layers_part(args.rounds)
        print("\n| piece of the forward's call path | us per call (min-max) |\n|---|---|")
        for r in results["layers"]:
            print(f"| {r['piece']} | {r['us']:.2f} ({r['spread_us'][0]:.2f}-"
                  f"{r['spread_us'][1]:.2f}) |")
    if "steps" in parts:
        results["steps"] = steps_part(args.rounds)
        print("\n| HVP step, 1 x 16 x N | wall us per step | kernels' GPU us | wall - kernels | "
              "host us to issue |\n|---|---|---|---|---|")
        for r in results["steps"]:
            print(f"| N = {r['n']}, d = {r['d']}{', causal' if r['causal'] else ''} | "
                  f"{r['wall_us']:.0f} | {r['kernels_us']:.0f} | {r['over_kernels_us']:.0f} | "
                  f"{r['issue_us']:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
