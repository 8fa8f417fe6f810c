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
           (torch.profiler), the host time one step takes to issue, and the step captured
           in a CUDA graph and replayed (no host path at all).

    python3 bench/host_path.py [--parts calls,layers,steps] [--rounds 5] [--json FILE]
                               [--profile "forward + backward"]

--profile NAME runs cProfile over 200 calls of the named row of the first part (its FlashBoB
side) and prints the functions by their own time and by cumulative time.

Each figure is the median over rounds of the mean over a batch of calls; the spread (min-max
over rounds) is printed beside it. In the first part the two sides of a row alternate batch by
batch, and the ratio is the median of the rounds' ratios.
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
from flashbob import _capi, _checks


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
         lambda: F.scaled_dot_product_attention(q, k, v), "SDPA", 500),
        ("forward, the operator", lambda: torch.ops.flashbob.forward(q, k, v, False, -1, -1, 0.0,
                                                                   None, None, 0, 0),
         lambda: F.scaled_dot_product_attention(q, k, v), "SDPA", 500),
        ("forward + backward", fwd_bwd(fb.attention), fwd_bwd(F.scaled_dot_product_attention),
         "SDPA", 300),
        ("torch.func.jvp", lambda: torch.func.jvp(fb.attention, (q, k, v), (tq, tk, tv)),
         lambda: torch.func.jvp(eager_attention, (q, k, v), (tq, tk, tv)),
         "torch.func.jvp of eager attention", 200),
        ("HVP step", lambda: hvp_step(fb.attention, qg, k, v, w, u),
         lambda: hvp_step(eager_attention, qg, k, v, w, u), "the step over eager attention", 200),
    ]
    return rows


def batch_us(f, calls):
    """Host time per call of f() over one batch of back-to-back calls, the stream drained after
    the batch (so queued GPU work cannot hide in the next batch)."""
    start = time.perf_counter()
    for _ in range(calls):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def paired(ours, theirs, calls, rounds, warmup=50):
    """Both calls timed in alternating batches (ours, theirs, ours, ...), so that a slow spell
    of the machine falls on both: (our median, spread), (their median, spread), and the median
    over rounds of the ratio of the two batches of a round."""
    for f in (ours, theirs):
        for _ in range(warmup):
            f()
    torch.cuda.synchronize()
    mine, ref = [], []
    for _ in range(rounds):
        mine.append(batch_us(ours, calls))
        ref.append(batch_us(theirs, calls))
    ratios = [a / b for a, b in zip(mine, ref)]
    return ((statistics.median(mine), (min(mine), max(mine))),
            (statistics.median(ref), (min(ref), max(ref))), statistics.median(ratios))


def calls_part(rounds):
    out = []
    for name, ours, theirs, against, calls in call_rows():
        (mine, mine_spread), (ref, ref_spread), ratio = paired(ours, theirs, calls, rounds)
        out.append({"call": name, "flashbob_us": mine, "flashbob_spread_us": mine_spread,
                    "reference": against, "reference_us": ref, "reference_spread_us": ref_spread,
                    "ratio": ratio})
    return out


def profile_call(name, calls=200):
    import cProfile
    import io
    import pstats
    rows = {row[0]: row[1] for row in call_rows()}
    if name not in rows:
        raise SystemExit(f"--profile: no call named {name!r} (one of {sorted(rows)})")
    f = rows[name]
    # cProfile sees one thread: run the backward on this one, not on autograd's device thread.
    torch.autograd.set_multithreading_enabled(False)
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
    """The call path taken apart. Each row times one piece alone on the tiny problem; they do
    not add up exactly (Python's caches warm differently), but they rank the costs. The
    autograd.Function rows time the two forms of Function on empty work, forward alone and with
    a backward through the engine (why the eager chain is written as it is)."""
    from flashbob.torch import _autograd, _launch
    q, k, v = tiny()
    qg, kg, vg = tiny(grad=True)
    do = torch.randn_like(q)
    config = _launch.DENSE
    o, lse = fb.attention(q, k, v, return_lse=True)
    plan = _launch.plan(q, k, v, config)
    values = []
    _launch._inputs(values, False, q, k, v)
    _launch._outputs(values, o)
    structs = _capi.tensor_structs(values, 4)
    stream = _launch.stream(q)
    lib = _capi._library()

    class WithSetupContext(torch.autograd.Function):  # torch.func's form, 11 arguments
        @staticmethod
        def forward(q, k, v, *config):  # two outputs, as the forward's O and L
            return torch.empty_like(q), q.new_empty(())

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs[:3], *output)
            ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, do, _dl):
            q, k, v, _, _ = ctx.saved_tensors
            return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)) + (None,) * 8

    WithSetupContext.forward.__signature__ = inspect.signature(WithSetupContext.forward)

    class OlderForm(torch.autograd.Function):  # the eager chain's form: ctx, tensors, one plan
        @staticmethod
        def forward(ctx, q, k, v, plan):
            ctx.save_for_backward(q, k, v)
            return torch.empty_like(q)

        @staticmethod
        def backward(ctx, do):
            q, k, v = ctx.saved_tensors
            return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None

    older_c = _autograd._c_apply(OlderForm)

    def guard():
        with torch.cuda.device(q.device):
            pass

    pieces = [
        ("forward: fb.attention, inputs without grad", lambda: fb.attention(q, k, v)),
        ("forward: SDPA, inputs without grad", lambda: F.scaled_dot_product_attention(q, k, v)),
        ("forward: fb.attention, inputs requiring grad", lambda: fb.attention(qg, kg, vg)),
        ("forward: SDPA, inputs requiring grad",
         lambda: F.scaled_dot_product_attention(qg, kg, vg)),
        ("argument checks (attention's)",
         lambda: (fb._check_operands(q, k, v, _checks.TORCH), fb._window((-1, -1), 1, 1))),
        ("may the kernels run directly? (_eager_ok of q, k, v)",
         lambda: _autograd._eager_ok(q, k, v)),
        ("the plan (cached C problem) lookup", lambda: _launch.plan(q, k, v, config)),
        ("the forward's launch alone (_launch.forward)", lambda: _launch.forward(plan, q, k, v)),
        ("of which: 3 inputs' layouts read and checked (_inputs)",
         lambda: _launch._inputs([], False, q, k, v)),
        ("of which: O and L allocated", lambda: (_launch.empty(q), _launch.rows(q))),
        ("of which: 4 C tensor structs packed (one pack_into)",
         lambda: _capi.tensor_structs(values, 4)),
        ("of which: the raw current stream", lambda: _launch.stream(q)),
        ("of which: the device check (no guard: q's device is current)",
         lambda: _launch.on_device(q)),
        ("of which: the C call with its launch (structs made)",
         lambda: lib.flashbob_forward(plan.c, *structs, lse.data_ptr(), stream)),
        ("(a device guard entered and left, avoided)", guard),
        ("the backward's launch alone (_launch.backward)",
         lambda: _launch.backward(plan, q, k, v, o, lse, do)),
        ("BoB's launch alone (_launch.bob)",
         lambda: _launch.bob(plan, q, k, v, o, lse, do, q, k, v)),
        ("Function with setup_context, forward only", lambda: WithSetupContext.apply(qg, kg, vg, *config)),
        ("Function with setup_context, forward + backward",
         lambda: WithSetupContext.apply(qg, kg, vg, *config)[0].backward(do)),
        ("older-form Function through the C entry, forward only", lambda: older_c(qg, kg, vg, plan)),
        ("older-form Function through the C entry, forward + backward",
         lambda: older_c(qg, kg, vg, plan).backward(do)),
        ("one kernel launched by torch, for scale: torch.Tensor.zero_()", lambda: o.zero_()),
        ("SDPA forward + backward, for scale",
         lambda: F.scaled_dot_product_attention(qg, kg, vg).backward(do)),
    ]
    out = []
    for name, f in pieces:
        us, spread = per_call(f, 1000, rounds)
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


class _NoBob(torch.autograd.Function):
    """The HVP step's autograd structure with no kernels (see empty_attention)."""
    @staticmethod
    def forward(ctx, q, k, v, do, uq, uk, uv):
        return tuple(torch.empty_like(t) for t in (q, k, v, do))

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("not differentiable")


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, do):
        ctx.save_for_backward(q, k, v, do)
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    @staticmethod
    def backward(ctx, uq, uk, uv):
        q, k, v, do = ctx.saved_tensors
        if torch.is_grad_enabled():
            return _NoBob.apply(q, k, v, do, uq, uk, uv)
        return tuple(torch.empty_like(t) for t in (q, k, v, do))


class _NoForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        ctx.save_for_backward(q, k, v)
        return torch.empty_like(q)

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        if torch.is_grad_enabled():
            return _NoBackward.apply(q, k, v, do)
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def empty_attention(q, k, v, causal=False):
    """Attention's autograd chain (forward -> backward -> BoB, each a node of the older form, as
    the eager chain's) with every output allocated and no kernel launched: what the HVP step
    costs PyTorch's engine and the loss's own ops, the floor for any attention written in
    Python."""
    return _NoForward.apply(q, k, v)


def graphed_per_call(step, rounds):
    """per_call of `step` captured once in a CUDA graph and replayed (torch.cuda.graph, after a
    warm-up on a side stream as its documentation asks): the step with no host path left, as a
    captured training step or torch.compile(mode="reduce-overhead") runs it. (None, message)
    where the capture fails."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            step()
    except RuntimeError as e:
        return None, str(e).splitlines()[0]
    return per_call(graph.replay, 50, rounds, warmup=5)


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
                floor, _ = per_call(lambda: hvp_step(empty_attention, q, k, v, w, u), 50, rounds,
                                    warmup=5)
                graphed, detail = graphed_per_call(step, rounds)
                if graphed is None:
                    print(f"N = {n}, d = {d}: the step could not be captured: {detail}")
                out.append({"n": n, "d": d, "causal": causal, "wall_us": wall,
                            "wall_spread_us": spread, "kernels_us": kernels,
                            "graphed_us": graphed,
                            "issue_us": statistics.median(issue),
                            "over_kernels_us": wall - kernels, "no_kernels_floor_us": floor})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="calls,layers,steps")
    ap.add_argument("--rounds", type=int, default=15)
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
        print("\n| piece of the call path | us per call (min-max) |\n|---|---|")
        for r in results["layers"]:
            print(f"| {r['piece']} | {r['us']:.2f} ({r['spread_us'][0]:.2f}-"
                  f"{r['spread_us'][1]:.2f}) |")
    if "steps" in parts:
        results["steps"] = steps_part(args.rounds)
        print("\n| HVP step, 1 x 16 x N | wall us per step | kernels' GPU us | wall - kernels | "
              "host us to issue | the step with no kernels (PyTorch's floor) | "
              "the step in a CUDA graph, us |\n|---|---|---|---|---|---|---|")
        for r in results["steps"]:
            print(f"| N = {r['n']}, d = {r['d']}{', causal' if r['causal'] else ''} | "
                  f"{r['wall_us']:.0f} | {r['kernels_us']:.0f} | {r['over_kernels_us']:.0f} | "
                  f"{r['issue_us']:.0f} | {r['no_kernels_floor_us']:.0f} | "
                  f"{'-' if r['graphed_us'] is None else format(r['graphed_us'], '.0f')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
