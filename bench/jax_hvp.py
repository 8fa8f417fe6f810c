#!/usr/bin/env python3
"""One Hessian-vector product step in JAX, forward over reverse (jax.jvp of jax.grad of
sum(attention(q, k, v) * w) in q, k, v along random directions): flashbob.jax, whose step runs
the forward, the backward, the forward's JVP, BoB and a backward, against XLA's own attention,
jax.nn.dot_product_attention(..., implementation="xla"), which materializes the N x N scores and
differentiates them. bf16, batch 1, 16 heads; prints a markdown table of the median milliseconds
of several runs after a warm-up (compile and, for flashbob, its kernels' JIT), "OOM" where XLA
runs out of GPU memory, and the relative L2 difference of the two HVPs where both ran.

    PYTHONPATH=python python3 bench/jax_hvp.py [--dims 64 128] [--seqs 1024 ... 65536] [--runs 5]
"""

import argparse
import statistics
import sys
import time

import jax
import jax.numpy as jnp

import flashbob.jax as fbj


def flashbob_attention(q, k, v, causal):
    return fbj.attention(q, k, v, causal=causal)


def xla_attention(q, k, v, causal):
    return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="xla")


def hvp_step(attention, causal):
    """jit(q, k, v, w, tq, tk, tv) -> the HVP of sum(O * w) along (tq, tk, tv), in q, k, v."""
    def loss(q, k, v, w):
        return jnp.sum(attention(q, k, v, causal).astype(jnp.float32) * w)
    grad = jax.grad(loss, argnums=(0, 1, 2))

    def step(q, k, v, w, tq, tk, tv):
        return jax.jvp(lambda q, k, v: grad(q, k, v, w), (q, k, v), (tq, tk, tv))[1]
    return jax.jit(step)


def problem(n, d, heads, seed=0):
    shape = (1, n, heads, d)
    keys = jax.random.split(jax.random.PRNGKey(seed), 7)
    q, k, v, tq, tk, tv = (jax.random.normal(key, shape, jnp.float32).astype(jnp.bfloat16)
                           for key in keys[:6])
    w = jax.random.normal(keys[6], shape, jnp.float32)
    return q, k, v, w, tq, tk, tv


def out_of_memory(error):
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def measure(step, args, runs):
    """(median ms, the HVP) or ("OOM", None)."""
    try:
        result = jax.block_until_ready(step(*args))  # compile, and flashbob's kernels' JIT
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            jax.block_until_ready(step(*args))
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times), result
    except Exception as e:  # XLA's JaxRuntimeError, at compile time or run time
        if out_of_memory(e):
            return "OOM", None
        raise


def relative_difference(a, b):
    num = sum(jnp.sum((x.astype(jnp.float32) - y.astype(jnp.float32)) ** 2) for x, y in zip(a, b))
    den = sum(jnp.sum(y.astype(jnp.float32) ** 2) for y in b)
    return float(jnp.sqrt(num / den))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqs", type=int, nargs="+", default=[1024 << i for i in range(7)])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    args = ap.parse_args()
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]

    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; HVP step (jvp of grad), "
          f"bf16, batch 1, {args.heads} heads, median of {args.runs} runs\n")
    print("| d | causal | N | flashbob.jax ms | XLA ms | XLA / flashbob | rel. diff |")
    print("|---|---|---|---|---|---|---|")
    for d in args.dims:
        for causal in causals:
            steps = hvp_step(flashbob_attention, causal), hvp_step(xla_attention, causal)
            xla_fits = True
            for n in args.seqs:
                inputs = problem(n, d, args.heads)
                fb_ms, fb_hvp = measure(steps[0], inputs, args.runs)
                # Past its first OOM, XLA's scores only grow: not tried again.
                xla_ms, xla_hvp = (measure(steps[1], inputs, args.runs) if xla_fits
                                   else ("OOM", None))
                xla_fits = xla_ms != "OOM"
                both = fb_hvp is not None and xla_hvp is not None
                ratio = f"{xla_ms / fb_ms:.2f}x" if both else "-"
                diff = f"{relative_difference(fb_hvp, xla_hvp):.1e}" if both else "-"
                cells = [f"{x:.2f}" if isinstance(x, float) else x for x in (fb_ms, xla_ms)]
                print(f"| {d} | {'yes' if causal else 'no'} | {n} | {cells[0]} | {cells[1]} | "
                      f"{ratio} | {diff} |", flush=True)
                del inputs, fb_hvp, xla_hvp
    return 0


if __name__ == "__main__":
    sys.exit(main())
