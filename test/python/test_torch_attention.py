"""flashbob.torch.attention against a float64 reference on the same bf16/fp16-rounded inputs:
forward, first derivatives, second derivatives (grad of grad), a Hessian-vector product and a
meta-learning outer gradient; plus argument validation. Needs a CUDA GPU and torch."""

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "examples"))

import flashbob.torch as fb  # noqa: E402
from meta_learning import make_problem, outer_gradient, reference_attention  # noqa: E402

TOL = {torch.bfloat16: 5e-3, torch.float16: 1e-3}
CASES = [  # (heads, N, M, d, causal)
    (2, 128, 128, 64, False),
    (2, 96, 160, 64, True),
    (2, 200, 136, 128, False),
    (1, 256, 256, 128, True),
]


def rel(got, ref):
    got, ref = got.double(), ref.double()
    return ((got - ref).norm() / ref.norm()).item()


def inputs(h, n, m, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    def r(rows):
        return torch.randn(1, h, rows, d, device="cuda", generator=g).to(dtype)
    return [r(n), r(m), r(m), r(n), r(n), r(m), r(m)]  # q k v dO uQ uK uV


def both(tensors):
    """The same values as leaves in the low precision and in float64."""
    low = [t.clone().requires_grad_() for t in tensors]
    high = [t.double().requires_grad_() for t in tensors]
    return low, high


def second_order(attn, q, k, v, do, uq, uk, uv, causal):
    o = attn(q, k, v, causal=causal)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, create_graph=True)
    gq, gk, gv, gdo = torch.autograd.grad((dq, dk, dv), (q, k, v, do), (uq, uk, uv))
    return [o, dq, dk, dv, gq, gk, gv, gdo]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("h,n,m,d,causal", CASES)
def test_first_and_second_derivatives(dtype, h, n, m, d, causal):
    t = inputs(h, n, m, d, dtype, seed=n + m + d)
    low, high = both(t)
    got = second_order(fb.attention, *low, causal)
    ref = second_order(reference_attention, *high, causal)
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    errors = {name: rel(a, b) for name, a, b in zip(names, got, ref)}
    print(dtype, h, n, m, d, "causal" if causal else "full", {k: f"{v:.2e}" for k, v in errors.items()})
    for name, err in errors.items():
        assert math.isfinite(err) and err <= TOL[dtype], f"{name}: {err:.2e}"


def test_hessian_vector_product():
    q, k, v, w, vec, _, _ = inputs(2, 128, 192, 64, torch.bfloat16, seed=3)
    def hvp(attn, q, k, v, w, vec):
        loss = (attn(q, k, v, causal=True) * w).sum()
        g, = torch.autograd.grad(loss, q, create_graph=True)
        h, = torch.autograd.grad((g * vec).sum(), q)
        return h
    got = hvp(fb.attention, q.clone().requires_grad_(), k, v, w, vec)
    ref = hvp(reference_attention, q.double().requires_grad_(), k.double(), v.double(), w.double(), vec.double())
    assert rel(got, ref) <= 5e-3


def test_meta_learning_outer_gradient_matches_reference():
    x_train, y_train, x_val, y_val, weights = make_problem(1, 2, 256, 64, torch.bfloat16, seed=5)
    got, _ = outer_gradient(fb.attention, x_train, y_train, x_val, y_val, weights)
    weights64 = [w.detach().double().requires_grad_() for w in weights]
    ref, _ = outer_gradient(reference_attention, x_train.double(), y_train.double(), x_val.double(),
                            y_val.double(), weights64)
    for g, r in zip(got, ref):
        # The chain rounds the projections and the adapted weights to bf16 along the way.
        assert rel(g, r) <= 2e-2, rel(g, r)


def test_third_derivative_is_refused():
    q, k, v, do, _, _, _ = inputs(1, 64, 64, 64, torch.bfloat16, seed=9)
    q.requires_grad_()
    do.requires_grad_()
    o = fb.attention(q, k, v)
    dq, = torch.autograd.grad(o, q, do, create_graph=True)
    gq, = torch.autograd.grad(dq.float().square().sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="third derivatives"):
        torch.autograd.grad(gq.float().sum(), q)


def test_validation_names_the_argument():
    q = torch.randn(1, 1, 64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="q must be bfloat16 or float16"):
        fb.attention(q.float(), q, q)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        fb.attention(q, q.cpu(), q)
    with pytest.raises(ValueError, match=r"k and v must have the same shape"):
        fb.attention(q, q, q[:, :, :32])
    with pytest.raises(ValueError, match="head_dim 40"):
        x = torch.randn(1, 1, 64, 40, device="cuda", dtype=torch.bfloat16)
        fb.attention(x, x, x)
    with pytest.raises(ValueError, match="scale must be positive"):
        fb.attention(q, q, q, scale=-1.0)
