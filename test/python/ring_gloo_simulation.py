"""flashbob.torch.distributed's rings on CPUs, in CI: R = 2 and 3 processes of a gloo
group, each holding its zigzag shard (K and V with all or half the query heads), run the
module's own forward, backward and BoB rings, its transfers (batch_isend_irecv), its merges
(flashbob.torch.ring: merge_forward, add_pass1, finish_pass1, chunk_pairs) and its autograd
Functions, through the gradient of a loss with create_graph and a Hessian-vector product.
Only the ring *steps* (one pair of chunks each, the GPU kernels' job) are replaced: by float64
statements of the same contract (docs/context-parallel.md; the C++ oracle's ring::forwardStep
... bobPass2Step). Gathered in sequence order, every output must match dense float64 autograd
on the whole sequence, which shares nothing with the rings. The same code on GPUs is
test_distributed.py.

    python3 test/python/ring_gloo_simulation.py      (test/python/run-ring-gloo.sh picks a python
                                                      with torch.distributed and gloo)

Debian's torch (1.13, CPU) runs it; it cannot import flashbob.torch's operators
(torch.library.custom_op is torch 2.4's), which the rings do not use: the child processes load
flashbob.torch.ring and flashbob.torch.distributed under a stand-in for that package's __init__.
"""

import json
import os
import sys
import tempfile
import types
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
TOL = 1e-10  # relative L2: float64 throughout (measured: below 1e-15)
HEADS = 2
# (ranks, causal, key/value heads): 1 of 2 is grouped-query attention.
CASES = [(ranks, causal, HEADS) for ranks in (2, 3) for causal in (True, False)]
CASES += [(2, True, 1), (3, False, 1)]


# --- the ring steps' contract, in float64 ------------------------------------------------------

def _scale(q, scale):
    return q.shape[-1] ** -0.5 if scale is None else scale


def _expand(t, q):
    """K-side heads repeated for their query heads (grouped-query attention)."""
    return t.repeat_interleave(q.shape[1] // t.shape[1], dim=1)


def _fold(t, like):
    """A K-side gradient summed over each K head's query heads."""
    b, h, m, d = t.shape
    return t.reshape(b, like.shape[1], h // like.shape[1], m, d).sum(2)


def _scores(q, k, causal, scale):
    """s q k^T of one chunk pair, the square causal mask on a diagonal pair."""
    s = _scale(q, scale) * q @ _expand(k, q).transpose(-1, -2)
    if causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(1), float("-inf"))
    return s


def _tiles(q, k, v, do, lse, d_row, causal, scale):
    p = torch.exp(_scores(q, k, causal, scale) - lse.unsqueeze(-1))  # the global L: global P
    dp = do @ _expand(v, q).transpose(-1, -2)
    return p, dp, p * (dp - d_row.unsqueeze(-1))


def _bob_tiles(q, k, do, uq, uk, uv, scale):
    k, uk, uv = (_expand(t, q) for t in (k, uk, uv))
    g = _scale(q, scale) * (uq @ k.transpose(-1, -2) + q @ uk.transpose(-1, -2))
    return g, do @ uv.transpose(-1, -2)


def forward_step(q, k, v, causal=False, scale=None):
    s = _scores(q, k, causal, scale)
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)) @ _expand(v, q), lse


def backward_step(q, k, v, o, do, lse, causal=False, scale=None):
    d_row = (do * o).sum(-1)
    p, _, ds = _tiles(q, k, v, do, lse, d_row, causal, scale)
    s = _scale(q, scale)
    return (s * ds @ _expand(k, q), _fold(s * ds.transpose(-1, -2) @ q, k),
            _fold(p.transpose(-1, -2) @ do, v), d_row)


def bob_pass1_step(q, k, v, o, do, lse, uq, uk, uv, causal=False, scale=None):
    d_row = (do * o).sum(-1)
    p, dp, ds = _tiles(q, k, v, do, lse, d_row, causal, scale)
    g, w = _bob_tiles(q, k, do, uq, uk, uv, scale)
    k, v, uk, uv = (_expand(t, q) for t in (k, v, uk, uv))
    gdspw = g * ds + p * w
    x1 = ds @ uk + gdspw @ k
    x2 = (p * dp) @ k
    x3 = p @ k
    x4 = p @ uv + (p * g) @ v
    return RING.Pass1(x1, x2, x3, x4, (g * p).sum(-1), gdspw.sum(-1)), d_row


def bob_pass2_step(q, k, v, do, lse, d_row, c, b, uq, uk, uv, causal=False, scale=None):
    p, dp, ds = _tiles(q, k, v, do, lse, d_row, causal, scale)
    g, w = _bob_tiles(q, k, do, uq, uk, uv, scale)
    c, b = c.unsqueeze(-1), b.unsqueeze(-1)
    dp_bar = p * (g - c)
    s_bar = g * ds + p * w - c * p * dp - b * p
    gk = _scale(q, scale) * (ds.transpose(-1, -2) @ uq + s_bar.transpose(-1, -2) @ q)
    return _fold(gk, k), _fold(dp_bar.transpose(-1, -2) @ do, v)


RING = None


def load_rings():
    """flashbob.torch.ring and flashbob.torch.distributed, with the float64 steps above."""
    global RING
    sys.path.insert(0, str(PYTHON_DIR))
    import flashbob  # loads no library until a call

    # flashbob.torch's own __init__ registers the operators (a newer torch than a CPU machine
    # may have); its submodules (_launch, distributed) import as they are. The steps that would
    # launch kernels are replaced below.
    stand_in = types.ModuleType("flashbob.torch")
    stand_in.__path__ = [str(PYTHON_DIR / "flashbob" / "torch")]
    sys.modules["flashbob.torch"] = flashbob.torch = stand_in
    from flashbob.torch import distributed, ring
    RING = ring
    ring.forward_step, ring.backward_step = forward_step, backward_step
    ring.bob_pass1_step, ring.bob_pass2_step = bob_pass1_step, bob_pass2_step
    return distributed


# --- the check ---------------------------------------------------------------------------------

def dense(q, k, v, w, vec, causal):
    """O, its gradients and the HVP by float64 autograd on the whole sequence."""
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    o = torch.softmax(_scores(q, k, causal, None), -1) @ _expand(v, q)
    grads = torch.autograd.grad((o * w).sum(), (q, k, v), create_graph=True)
    hvp = torch.autograd.grad(sum((g * u).sum() for g, u in zip(grads, vec)), (q, k, v))
    return [o.detach(), *(g.detach() for g in grads), *hvp]


def worker(rank, ranks, init, out, causal, heads_kv):
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=ranks)
    try:
        fd = load_rings()
        g = torch.Generator().manual_seed(29 + ranks)
        n = 2 * ranks * 5  # chunks of 5 rows
        heads = [HEADS, heads_kv, heads_kv, HEADS, HEADS, heads_kv, heads_kv]  # q k v w uq uk uv
        q, k, v, w, *vec = (torch.randn(1, h, n, 8, generator=g, dtype=torch.float64)
                            for h in heads)
        leaves = [fd.shard(t).clone().requires_grad_() for t in (q, k, v)]
        o = fd._RingAttention.apply(*leaves, causal, None, None)
        grads = torch.autograd.grad((o * fd.shard(w)).sum(), leaves, create_graph=True)
        inner = sum((gr * fd.shard(u)).sum() for gr, u in zip(grads, vec))
        hvp = torch.autograd.grad(inner, leaves)
        got = [fd.unshard(t.detach()) for t in (o, *grads, *hvp)]
        if rank == 0:
            want = dense(q, k, v, w, vec, causal)
            names = ["O", "dQ", "dK", "dV", "Hq", "Hk", "Hv"]
            with open(out, "w") as f:
                json.dump({name: ((a - b).norm() / b.norm()).item()
                           for name, a, b in zip(names, got, want)}, f)
    finally:
        dist.destroy_process_group()


def main():
    failed = []
    for ranks, causal, heads_kv in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "errors.json")
            mp.spawn(worker, args=(ranks, os.path.join(tmp, "init"), out, causal, heads_kv),
                     nprocs=ranks)
            with open(out) as f:
                errors = json.load(f)
        bad = {name: e for name, e in errors.items() if not e <= TOL}
        print(f"gloo ring R={ranks} causal={causal} heads_kv={heads_kv}/{HEADS}: " +
              " ".join(f"{name} {e:.1e}" for name, e in errors.items()) +
              (f"  FAIL (> {TOL:g}): {sorted(bad)}" if bad else ""))
        if bad:
            failed.append((ranks, causal, heads_kv))
    if failed:
        sys.exit(f"{len(failed)} of {len(CASES)} rings missed float64 autograd: {failed}")
    print(f"all {len(CASES)} rings within {TOL:g} of float64 autograd on the whole sequence")


if __name__ == "__main__":
    main()
