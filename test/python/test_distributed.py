"""flashbob.torch.distributed (context-parallel rings) in real processes: two ranks of a gloo group (staged
through host memory) on this machine's GPU, or, with FLASHBOB_TEST_NCCL=1 on a machine with two
GPUs, NCCL between them. Each rank holds its zigzag shard of q, k, v and of a loss's weights; the
ranks together compute O, the gradient of the loss with create_graph, and a Hessian-vector
product through it (the backward ring, then BoB's two rings). Gathered in sequence order, all of
them must match float64 autograd on the whole sequence."""

import json
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is installed only on the GPU machine")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

TOL = 5e-3  # relative L2 against float64, bf16 inputs
NCCL = os.environ.get("FLASHBOB_TEST_NCCL") == "1"


def reference(q, k, v, w, vec, causal):
    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]  # grouped-query attention: each K, V head serves `group`
    kk, vv = (t.repeat_interleave(group, dim=1) for t in (k, v))
    scores = (q @ kk.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1),
                                    float("-inf"))
    o = torch.softmax(scores, -1) @ vv
    grads = torch.autograd.grad((o * w.double()).sum(), (q, k, v), create_graph=True)
    hvp = torch.autograd.grad(sum((g * u.double()).sum() for g, u in zip(grads, vec)), (q, k, v))
    return [o, *grads, *hvp]


def worker(rank, world, init, out, causal, d, heads_kv):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # the GPU machine requires it
    device = torch.device("cuda", rank if NCCL else 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl" if NCCL else "gloo", init_method=f"file://{init}", rank=rank,
                            world_size=world)
    try:
        from flashbob.torch import distributed as fd
        g = torch.Generator(device=device).manual_seed(7 + d)
        n = 2 * world * 96
        heads = [2, heads_kv, heads_kv, 2, 2, heads_kv, heads_kv]  # q, k, v, w, uq, uk, uv
        q, k, v, w, *vec = (torch.randn(1, h, n, d, device=device, generator=g)
                            .to(torch.bfloat16) for h in heads)
        leaves = [fd.shard(t).clone().requires_grad_() for t in (q, k, v)]
        o = fd.attention(*leaves, causal=causal)
        grads = torch.autograd.grad((o.float() * fd.shard(w).float()).sum(), leaves,
                                    create_graph=True)
        inner = sum((gr.float() * fd.shard(u).float()).sum() for gr, u in zip(grads, vec))
        hvp = torch.autograd.grad(inner, leaves)
        got = [fd.unshard(t.detach()) for t in (o, *grads, *hvp)]
        if rank == 0:
            want = reference(q, k, v, w, vec, causal)
            names = ["O", "dQ", "dK", "dV", "Hq", "Hk", "Hv"]
            errors = {name: ((a.double() - b.detach()).norm() / b.detach().norm()).item()
                      for name, a, b in zip(names, got, want)}
            with open(out, "w") as f:
                json.dump(errors, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("causal, d, heads_kv", [(True, 64, 2), (False, 64, 2), (True, 128, 2),
                                                (False, 128, 2), (True, 64, 1)])
def test_two_ranks_match_float64_through_a_hessian_vector_product(tmp_path, causal, d, heads_kv):
    """heads_kv 1 of 2 query heads: grouped-query attention through the rings."""
    if NCCL and torch.cuda.device_count() < 2:
        pytest.skip("FLASHBOB_TEST_NCCL=1 needs two GPUs")
    out = tmp_path / "errors.json"
    mp.spawn(worker, args=(2, str(tmp_path / "init"), str(out), causal, d, heads_kv), nprocs=2)
    errors = json.loads(out.read_text())
    print(f"distributed {'nccl' if NCCL else 'gloo'} 2 ranks causal={causal} d={d} "
          f"heads_kv={heads_kv}: " +
          " ".join(f"{name} {e:.2e}" for name, e in errors.items()))
    for name, e in errors.items():
        assert e <= TOL, (name, e)
