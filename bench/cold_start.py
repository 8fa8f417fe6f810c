"""Cold start of one HVP step: the five kernels it runs (fwd, bwd_q, bwd_kv, bob_q, bob_kv)
compiled from nothing (an empty kernel cache, a fresh process; precompile compiles them at
once, one thread each), then the same kernels loaded from the disk cache by a second fresh
process, then one warm step, then the warm launch overhead (host time per call of a tiny
forward, against SDPA's). Each kernel's compile time runs from the "flashbob" logger's INFO
line "compiling <kind> (i/n): <kernel>" to its DEBUG line "compiled <kernel>: ..."; their sum
against the precompile's wall time is what compiling at once saves.

    python3 bench/cold_start.py [--heads 16] [--seq 4096] [--head-dim 128] [--causal] [--profile]
                                [--signature-ab]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import cProfile, io, json, logging, pstats, sys, time, torch
import flashbob.torch as fb
args = json.loads(sys.argv[1])
def report(what, profile, order):
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats(order).print_stats(15)
    print(f"== profile of the {what} (by {order} time)", file=sys.stderr)
    print(out.getvalue(), file=sys.stderr)
events = []
class Stamp(logging.Handler):
    def emit(self, record):
        events.append((time.perf_counter(), record.getMessage()))
log = logging.getLogger("flashbob")
log.addHandler(Stamp())
log.setLevel(logging.DEBUG)
torch.cuda.init()
torch.zeros(1, device="cuda")
h, n, d, causal = args["heads"], args["seq"], args["head_dim"], args["causal"]
t0 = time.perf_counter()
fb.precompile(1, h, n, n, d, causal=causal, ops=("forward", "backward", "bob"))
t1 = time.perf_counter()
q, k, v, w, u = (torch.randn(1, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(5))
q.requires_grad_()
def step():
    o = fb.attention(q, k, v, causal=causal)
    g, = torch.autograd.grad((o * w).sum(), q, create_graph=True)
    hvp, = torch.autograd.grad(g, q, u)
    return hvp
profile = cProfile.Profile() if args["profile"] else None
if profile:
    profile.enable()
step(); torch.cuda.synchronize()
t2 = time.perf_counter()
first_step_s = t2 - t1
if profile:
    profile.disable()
    report("first step", profile, "cumulative")
    t2 = time.perf_counter()  # the warm step below starts after the report
step(); torch.cuda.synchronize()
t3 = time.perf_counter()
if profile:
    # Warm steps, back to back: where the host time of a step goes once everything is loaded.
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    profile.disable()
    report("20 warm steps", profile, "tottime")
    report("20 warm steps", profile, "cumulative")
# Warm launch overhead: a forward on a tiny problem (one block; the GPU time is a few
# microseconds), called back to back, against SDPA on the same tensors. Host time per call.
tiny = [torch.randn(1, 1, 128, d, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
def per_call(f, calls=2000):
    for _ in range(50):
        f()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls
with torch.no_grad():
    launch = {"flashbob_forward_s": per_call(lambda: fb.attention(*tiny)),
              "sdpa_forward_s": per_call(
                  lambda: torch.nn.functional.scaled_dot_product_attention(*tiny))}
    if profile:
        profile = cProfile.Profile()
        profile.enable()
        per_call(lambda: fb.attention(*tiny), calls=500)
        profile.disable()
        report("tiny forwards", profile, "tottime")
if args["signature_ab"]:
    # An experiment on the op's host time, in one process: torch's Function.apply recomputes
    # inspect.signature(forward) on every call; inspect returns a function's __signature__
    # when it has one (the package sets it at import; the "without" arm removes it and the
    # state as imported comes back after). Arms alternate (without, with, ...), three rounds;
    # host time per call of the tiny forward and per warm step.
    import inspect
    forwards = [f.forward for f in (fb._autograd._AttentionFn, fb._autograd._BackwardFn,
                                   fb._autograd._BobFn)]
    as_imported = {f: f.__dict__.get("__signature__") for f in forwards}
    def put(f, signature):
        if signature is None:
            f.__dict__.pop("__signature__", None)
        else:
            f.__signature__ = signature
    def cached(on):
        for f in forwards:
            put(f, inspect.signature(f) if on else None)
    ab = {"without": {"forward_s": [], "step_s": []}, "with": {"forward_s": [], "step_s": []}}
    for _ in range(3):
        for arm in ("without", "with"):
            cached(arm == "with")
            with torch.no_grad():
                ab[arm]["forward_s"].append(per_call(lambda: fb.attention(*tiny), calls=1000))
            ab[arm]["step_s"].append(per_call(step, calls=50))
    for f, signature in as_imported.items():
        put(f, signature)
    launch["signature_ab"] = ab
compiles, ended = [], {}
for stamp, message in events:
    if message.startswith("flashbob: compiling "):
        compiles.append({"kernel": message.split(": ")[-1], "started_s": stamp - t0})
    elif message.startswith("flashbob: compiled "):
        ended[message.split(" ")[2].rstrip(":")] = stamp - t0
for c in compiles:
    c["ended_s"] = ended.get(c["kernel"])
print(json.dumps({"precompile_s": t1 - t0, "first_step_s": first_step_s, "warm_step_s": t3 - t2,
                  "compiled": compiles, **launch}))
"""


def run(cache, args):
    env = dict(os.environ, FLASHBOB_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(vars(args))], env=env,
                         capture_output=True, text=True, check=True)
    if args.profile:
        print(out.stderr, file=sys.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--signature-ab", action="store_true",
                    help="time the tiny forward and the warm step with and without each "
                    "autograd.Function's forward signature cached (__signature__), alternated")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the first step, 20 warm steps and the tiny forwards (to "
                    "stderr)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        cold = run(cache, args)
        disk = run(cache, args)
    print(f"HVP step, 1 x {args.heads} heads x N = {args.seq}, d = {args.head_dim}"
          f"{', causal' if args.causal else ''}, bf16")
    print(f"cold (empty cache): precompile of {len(cold['compiled'])} kernels "
          f"{cold['precompile_s']:.2f} s, then first step {cold['first_step_s'] * 1e3:.1f} ms")
    total = 0.0
    for c in cold["compiled"]:
        took = (c["ended_s"] if c["ended_s"] is not None else cold["precompile_s"]) - c["started_s"]
        total += took
        print(f"  {c['kernel']}: {took:.2f} s (from {c['started_s']:.2f} s)")
    print(f"  sum of the compilations {total:.2f} s, wall {cold['precompile_s']:.2f} s")
    print(f"from the disk cache (new process): precompile {disk['precompile_s'] * 1e3:.1f} ms, "
          f"{len(disk['compiled'])} compiled")
    print(f"warm step: {cold['warm_step_s'] * 1e3:.2f} ms")
    print(f"warm launch, forward of 1 x 1 x 128 x {args.head_dim} back to back (host time per "
          f"call): flashbob {disk['flashbob_forward_s'] * 1e6:.1f} us, SDPA "
          f"{disk['sdpa_forward_s'] * 1e6:.1f} us")
    if args.signature_ab:
        for arm, runs in disk["signature_ab"].items():
            print(f"forward signature {'cached' if arm == 'with' else 'recomputed'} (3 rounds, "
                  f"alternated): tiny forward "
                  f"{', '.join(f'{t * 1e6:.1f}' for t in runs['forward_s'])} us; warm step "
                  f"{', '.join(f'{t * 1e3:.3f}' for t in runs['step_s'])} ms")


if __name__ == "__main__":
    main()
