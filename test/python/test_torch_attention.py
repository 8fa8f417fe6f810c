"""flashbob.torch.attention (and attention_varlen, packed batches of variable-length sequences)
against a float64 reference on the same bf16/fp16-rounded inputs: forward, first derivatives,
second derivatives (grad of grad), a Hessian-vector product and a meta-learning outer gradient;
plus argument validation. Needs a CUDA GPU and torch."""

import ast
import itertools
import math
import os
import subprocess
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


def inputs(h, n, m, d, dtype, seed, h_kv=None):
    """q k v dO uQ uK uV; the key side with h_kv heads (default h)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    def r(heads, rows):
        return torch.randn(1, heads, rows, d, device="cuda", generator=g).to(dtype)
    kv = h if h_kv is None else h_kv
    return [r(h, n), r(kv, m), r(kv, m), r(h, n), r(h, n), r(kv, m), r(kv, m)]


def both(tensors):
    """The same values as leaves in the low precision and in float64."""
    low = [t.clone().requires_grad_() for t in tensors]
    high = [t.double().requires_grad_() for t in tensors]
    return low, high


def second_order(attn, q, k, v, do, uq, uk, uv, causal, **options):
    o = attn(q, k, v, causal=causal, **options)
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


PADDED_HEAD_DIMS = [8, 40, 72, 100, 120]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", PADDED_HEAD_DIMS)
def test_head_dims_that_are_no_multiple_of_16(dtype, d):
    """d = 8, 40, 72, 120 run kernels 8 columns wider than their tensors, d = 100 runs the
    d = 112 kernels on zero-padded copies: forward, first derivatives, grad of grad (BoB) and
    torch.func.jvp (forward mode) against float64 autograd at d, whose scale is 1/sqrt(d); grouped
    heads and a causal mask with N != M, then a (batch, seq, heads, d) layout read in place."""
    h, h_kv, n, m = 4, 2, 150, 190
    t = inputs(h, n, m, d, dtype, seed=d, h_kv=h_kv)
    low, high = both(t)
    got = second_order(fb.attention, *low, True)
    ref = second_order(reference_attention, *high, True)
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    errors = {name: rel(a, b) for name, a, b in zip(names, got, ref)}
    q, k, v, _, tq, tk, tv = t
    _, to = torch.func.jvp(lambda q, k, v: fb.attention(q, k, v, causal=True), (q, k, v),
                           (tq, tk, tv))
    _, to64 = torch.func.jvp(lambda q, k, v: reference_attention(q, k, v, causal=True),
                             tuple(x.double() for x in (q, k, v)),
                             tuple(x.double() for x in (tq, tk, tv)))
    errors["tO"] = rel(to, to64)
    # (batch, seq, heads, d) storage passed as its .transpose(1, 2) views.
    views = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in t]
    o = fb.attention(*views[:3])
    errors["O (b,s,h,d)"] = rel(o, reference_attention(*(x.double() for x in t[:3])))
    print(dtype, "d", d, {k: f"{v:.2e}" for k, v in errors.items()})
    for name, err in errors.items():
        assert math.isfinite(err) and err <= TOL[dtype], f"{name}: {err:.2e}"
    for name, a, b in zip(names, got, ref):
        assert a.shape == b.shape, name


VALUE_WIDTHS = [(192, 128), (64, 128), (40, 72)]  # (q's and k's head_dim, v's)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d,dv", VALUE_WIDTHS)
def test_v_of_another_head_dim_than_q_and_k(dtype, d, dv):
    """v (and so O, dO, dV, uV, gV, gdO, tV, tO) dv wide, q and k d wide, as multi-head latent
    attention has them (192 and 128): forward, first derivatives, grad of grad (BoB) and
    torch.func.jvp against float64 autograd, the scale 1/sqrt(d); grouped heads and a causal
    mask with N != M; then a (batch, seq, heads, dv) layout of v, whose O comes back in it."""
    h, h_kv, n, m = 4, 2, 150, 190
    g = torch.Generator(device="cuda").manual_seed(d + dv)
    def r(heads, rows, width):
        return torch.randn(1, heads, rows, width, device="cuda", generator=g).to(dtype)
    t = [r(h, n, d), r(h_kv, m, d), r(h_kv, m, dv), r(h, n, dv), r(h, n, d), r(h_kv, m, d),
         r(h_kv, m, dv)]  # q k v dO uQ uK uV
    low, high = both(t)
    got = second_order(fb.attention, *low, True)
    ref = second_order(reference_attention, *high, True)
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    for name, a, b in zip(names, got, ref):
        assert a.shape == b.shape, name
    errors = {name: rel(a, b) for name, a, b in zip(names, got, ref)}
    q, k, v, _, tq, tk, _ = t
    tv = r(h_kv, m, dv)
    _, to = torch.func.jvp(lambda q, k, v: fb.attention(q, k, v, causal=True), (q, k, v),
                           (tq, tk, tv))
    _, to64 = torch.func.jvp(lambda q, k, v: reference_attention(q, k, v, causal=True),
                             tuple(x.double() for x in (q, k, v)),
                             tuple(x.double() for x in (tq, tk, tv)))
    assert to.shape == to64.shape
    errors["tO"] = rel(to, to64)
    views = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]
    o = fb.attention(*views)
    assert o.shape == (1, h, n, dv) and o.transpose(1, 2).is_contiguous()
    errors["O (b,s,h,d)"] = rel(o, reference_attention(*(x.double() for x in (q, k, v))))
    print(dtype, "d", d, "dv", dv, {k: f"{v:.2e}" for k, v in errors.items()})
    for name, err in errors.items():
        assert math.isfinite(err) and err <= TOL[dtype], f"{name}: {err:.2e}"


GQA_CASES = [  # (heads, heads_kv, N, M, d, causal)
    (6, 2, 96, 160, 64, True),    # groups of 3
    (4, 1, 200, 136, 128, False),  # multi-query
    (8, 2, 130, 130, 64, True),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("h,h_kv,n,m,d,causal", GQA_CASES)
def test_grouped_query_attention_first_and_second_derivatives(dtype, h, h_kv, n, m, d, causal):
    """k, v with fewer heads than q: every derivative against float64 autograd through K and V
    repeated over each group (so their gradients are the group sums); dK, dV, gK, gV come back
    in k's shape, and BoB is bit-identical run to run."""
    t = inputs(h, n, m, d, dtype, seed=h + n + m + d, h_kv=h_kv)
    low, high = both(t)
    got = second_order(fb.attention, *low, causal)
    ref = second_order(reference_attention, *high, causal)
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    for name, a, b in zip(names, got, ref):
        assert a.shape == b.shape, name
        assert rel(a, b) <= TOL[dtype], f"{name}: {rel(a, b):.2e}"
    assert got[2].shape == t[1].shape and got[5].shape == t[1].shape
    again = second_order(fb.attention, *both(t)[0], causal)
    for name, a, b in zip(names, got, again):
        assert torch.equal(a, b), name


WINDOW_CASES = [  # (heads, heads_kv, N, M, d, causal, window_size)
    (2, 2, 200, 200, 64, False, (32, 16)),   # two-sided
    (2, 1, 300, 200, 128, True, (50, -1)),   # causal with a left window, N > M, multi-query
    (4, 2, 130, 333, 64, False, (-1, 20)),   # right side only, N < M
    (2, 2, 256, 256, 128, False, (1, 1)),    # three keys a query, narrower than a block
    (2, 2, 200, 100, 64, False, (10, 5)),    # rows 0-94 see no key at all
    (2, 2, 160, 96, 64, False, (-1, 0)),     # the causal mask, spelled as a window
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("h,h_kv,n,m,d,causal,window", WINDOW_CASES)
def test_sliding_window_first_and_second_derivatives(dtype, h, h_kv, n, m, d, causal, window):
    """window_size as flash-attn's: every derivative against float64 autograd through the same
    mask, rows the window leaves empty give 0, BoB bit-identical run to run."""
    t = inputs(h, n, m, d, dtype, seed=h + n + m + d + window[0], h_kv=h_kv)
    low, high = both(t)
    got = second_order(fb.attention, *low, causal, window_size=window)
    ref = second_order(reference_attention, *high, causal, window_size=window)
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    errors = {name: rel(a, b) for name, a, b in zip(names, got, ref)}
    print(dtype, h, h_kv, n, m, d, causal, window, {k: f"{v:.2e}" for k, v in errors.items()})
    for name, err in errors.items():
        assert math.isfinite(err) and err <= TOL[dtype], f"{name}: {err:.2e}"
    again = second_order(fb.attention, *both(t)[0], causal, window_size=window)
    for name, a, b in zip(names, got, again):
        assert torch.equal(a, b), name


ONE_KEY_CASES = [  # (N, M, causal, window_size): every row, or row 0, sees a single key
    (200, 1, False, (-1, -1)),
    (200, 1, True, (-1, -1)),
    (256, 256, False, (0, 0)),
    (1, 1, True, (-1, -1)),
    (300, 300, True, (-1, -1)),  # row 0 only
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,m,causal,window", ONE_KEY_CASES)
def test_rows_that_see_one_key_have_exactly_zero_second_derivatives_in_q(dtype, n, m, causal,
                                                                           window):
    """A row that sees one key has P = 1 whatever its scores: gQ is exactly 0 there (as eager
    attention gives), not the rounding residue of BoB's X1 - c X2 - b X3; the rest of the row's
    outputs against float64 as usual, with an absolute bound where float64's are zeros too."""
    t = inputs(2, n, m, 64, dtype, seed=n + m + 7)
    low, high = both(t)
    got = second_order(fb.attention, *low, causal, window_size=window)
    ref = second_order(reference_attention, *high, causal, window_size=window)
    rows = torch.arange(n, device="cuda")
    diagonal = rows + (m - n)
    right = 0 if causal else window[1]
    last = torch.clamp(diagonal + right, max=m - 1) if right >= 0 else torch.full_like(rows, m - 1)
    first = torch.clamp(diagonal - window[0], min=0) if window[0] >= 0 else torch.zeros_like(rows)
    one_key = (last == first)
    assert one_key.any()
    gq = got[4]
    print(dtype, n, m, causal, window, f"{int(one_key.sum())} one-key rows, max |gQ| there "
          f"{gq[:, :, one_key].abs().max().item():.2e}")
    assert torch.count_nonzero(gq[:, :, one_key]) == 0
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    for name, a, b in zip(names, got, ref):
        if b.norm() > 1e-6:
            assert rel(a, b) <= TOL[dtype], f"{name}: {rel(a, b):.2e}"
        else:  # zero in exact arithmetic (nothing depends on the scores): absolute
            assert (a.double() - b).norm() <= 1e-3, f"{name}: {(a.double() - b).norm():.2e}"


def test_sliding_window_forward_mode_hvp():
    """jvp of grad (forward-over-reverse) through a windowed layer runs BoB with the window."""
    q, k, v, w, tq, _, _ = inputs(2, 192, 192, 64, torch.bfloat16, seed=47)
    window = (24, 0)
    loss = lambda q: (fb.attention(q, k, v, window_size=window).float() * w.float()).sum()  # noqa: E731
    loss64 = lambda q: (reference_attention(q, k.double(), v.double(), window_size=window)  # noqa: E731
                        * w.double()).sum()
    _, hvp = torch.func.jvp(torch.func.grad(loss), (q,), (tq,))
    _, ref = torch.func.jvp(torch.func.grad(loss64), (q.double(),), (tq.double(),))
    assert rel(hvp, ref) <= TOL[torch.bfloat16]


def test_return_lse_is_the_natural_log_sum_exp():
    """return_lse=True gives L = logsumexp(scale * q k^T) per query row (float64 reference), the
    same O as without it, -inf on a row that sees no key (causal with N > M), no gradient."""
    q, k, v, _, _, _, _ = inputs(4, 160, 96, 64, torch.bfloat16, seed=41, h_kv=2)
    for causal in (False, True):
        o, lse = fb.attention(q, k, v, causal=causal, scale=0.3, return_lse=True)
        assert lse.shape == (1, 4, 160) and lse.dtype == torch.float32 and not lse.requires_grad
        assert torch.equal(o, fb.attention(q, k, v, causal=causal, scale=0.3))
        s = 0.3 * q.double() @ k.double().repeat_interleave(2, dim=1).transpose(-1, -2)
        if causal:
            keep = torch.ones(160, 96, dtype=torch.bool, device="cuda").tril(diagonal=96 - 160)
            s = s.masked_fill(~keep, float("-inf"))
        ref = torch.logsumexp(s, dim=-1)
        seen = torch.isfinite(ref)
        assert torch.equal(torch.isfinite(lse), seen)
        assert (lse.double()[seen] - ref[seen]).abs().max().item() <= 1e-4
        assert bool((lse[~seen] == float("-inf")).all())


def test_bshd_layout_runs_without_copies():
    """(batch, seq, heads, head_dim) tensors, as flash-attn takes them, passed as .transpose(1, 2)
    views: the operator reads them in place (no copy) and every derivative matches float64."""
    t = inputs(4, 96, 160, 64, torch.bfloat16, seed=43, h_kv=2)
    bshd = [x.transpose(1, 2).contiguous() for x in t]  # the caller's storage
    views = [x.transpose(1, 2) for x in bshd]
    from flashbob.torch._launch import readable as _readable
    assert all(_readable(x) is x for x in views)
    low = [x.detach().requires_grad_() if i < 4 else x for i, x in enumerate(views)]
    got = second_order(fb.attention, *low, True)
    ref = second_order(reference_attention, *both(t)[1], True)
    for name, a, b in zip(["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"], got, ref):
        assert rel(a, b) <= TOL[torch.bfloat16], f"{name}: {rel(a, b):.2e}"


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
    with pytest.raises(ValueError, match=r"k and v must agree in all but head_dim"):
        fb.attention(q, q, q[:, :, :32])
    with pytest.raises(ValueError, match=r"head_dim_v 4 is unsupported"):
        fb.attention(q, q, q[..., :4])
    with pytest.raises(ValueError, match=r"head_dim 4 is unsupported \(8 to 256\)"):
        x = torch.randn(1, 1, 64, 4, device="cuda", dtype=torch.bfloat16)
        fb.attention(x, x, x)
    with pytest.raises(ValueError, match="scale must be positive"):
        fb.attention(q, q, q, scale=-1.0)
    q4 = torch.randn(1, 4, 64, 64, device="cuda", dtype=torch.bfloat16)
    k3 = torch.randn(1, 3, 64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"k's heads \(3\) must divide q's \(4\)"):
        fb.attention(q4, k3, k3)
    with pytest.raises(ValueError, match="differ in batch or head_dim"):
        fb.attention(q4, torch.cat([k3, k3]), torch.cat([k3, k3]))
    with pytest.raises(ValueError, match="window_size must be a pair"):
        fb.attention(q, q, q, window_size=16)
    with pytest.raises(ValueError, match=r"window_size's left side must be an int >= -1"):
        fb.attention(q, q, q, window_size=(-2, 0))
    with pytest.raises(ValueError, match=r"window_size's right side \(65\) is larger than the seq"):
        fb.attention(q, q, q, window_size=(4, 65))


def test_a_checked_call_skips_no_check_for_another_call():
    """attention() keeps the calls it checked, keyed by what the checks read: after a valid call
    every invalid variation of it is still refused, and variations outside the key's plain types
    (numpy ints, an int causal) take the full checks."""
    import numpy as np
    q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.bfloat16)
    ref = fb.attention(q, q, q, causal=True, scale=0.1, window_size=(8, 0))
    assert torch.equal(fb.attention(q, q, q, causal=True, scale=0.1, window_size=(8, 0)), ref)
    with pytest.raises(TypeError, match="q, k, v must share a dtype"):
        fb.attention(q, q.half(), q, causal=True, scale=0.1, window_size=(8, 0))
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        fb.attention(q, q, q.cpu(), causal=True, scale=0.1, window_size=(8, 0))
    with pytest.raises(ValueError, match="scale must be positive"):
        fb.attention(q, q, q, causal=True, scale=-0.1, window_size=(8, 0))
    with pytest.raises(ValueError, match=r"window_size's left side \(65\) is larger"):
        fb.attention(q, q, q, causal=True, scale=0.1, window_size=(65, 0))
    with pytest.raises(ValueError, match=r"window_size's left side must be an int >= -1"):
        fb.attention(q, q, q, causal=True, scale=0.1, window_size=(np.int64(8), 0))
    with pytest.raises(ValueError, match=r"k's heads \(3\) must divide q's \(2\)"):
        k3 = torch.randn(1, 3, 64, 64, device="cuda", dtype=torch.bfloat16)
        fb.attention(q, k3, k3, causal=True, scale=0.1, window_size=(8, 0))
    assert torch.equal(fb.attention(q, q, q, causal=1, scale=0.1, window_size=(8, 0)), ref)


# --- the operators as torch sees them -----------------------------------------------------------

def small(dtype=torch.bfloat16, seed=11, h=2, n=96, m=128, d=64):
    return inputs(h, n, m, d, dtype, seed)


DENSE = (None, None, 0, 0)  # (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k): no packing
CAUSAL, FULL, WINDOW = ((True, -1, -1, 0.0, *DENSE), (False, -1, -1, 0.0, *DENSE),
                        (False, 40, 8, 0.0, *DENSE))


def test_opcheck_each_operator():
    """Schema, fake (meta) implementation, autograd registration and AOT dispatch of each op.
    Every op ends in (causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k)."""
    q, k, v, do, uq, uk, uv = small()
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    torch.library.opcheck(torch.ops.flashbob.forward.default, (q, k, v, *CAUSAL))
    torch.library.opcheck(torch.ops.flashbob.forward.default, (q, k, v, *WINDOW))
    o, lse = torch.ops.flashbob.forward(q.detach(), k.detach(), v.detach(), *CAUSAL)
    do.requires_grad_()
    torch.library.opcheck(torch.ops.flashbob.backward.default, (q, k, v, o, lse, do, *CAUSAL))
    # BoB's autograd formula raises (third derivatives), so its check runs without gradients.
    plain = [t.detach() for t in (q, k, v, o, lse, do, uq, uk, uv)]
    torch.library.opcheck(torch.ops.flashbob.bob.default, (*plain, *CAUSAL),
                          test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(torch.ops.flashbob.forward_jvp.default, (*plain[:5], *plain[6:], *CAUSAL),
                          test_utils=("test_schema", "test_faketensor"))
    # Grouped-query shapes: the fake implementations give dK, dV (and gK, gV) k's heads.
    gq_, gk_, gv_, gdo_, guq, guk, guv = inputs(4, 64, 96, 64, torch.bfloat16, seed=15, h_kv=2)
    go, glse = torch.ops.flashbob.forward(gq_, gk_, gv_, *FULL)
    torch.library.opcheck(torch.ops.flashbob.backward.default,
                          (gq_, gk_, gv_, go, glse, gdo_, *FULL),
                          test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(torch.ops.flashbob.bob.default,
                          (gq_, gk_, gv_, go, glse, gdo_, guq, guk, guv, *FULL),
                          test_utils=("test_schema", "test_faketensor"))
    # Its result is BoB's gdO at the same cotangents (a different kernel, same quantity).
    to = torch.ops.flashbob.forward_jvp(*plain[:5], *plain[6:], *CAUSAL)
    gdo = torch.ops.flashbob.bob(*plain, *CAUSAL)[3]
    assert rel(to, gdo) <= TOL[torch.bfloat16]


def check_compiles_like_eager(step, q, k, v, w):
    """`step(q, k, v, w)` under torch.compile(fullgraph=True): no graph break, the value of the
    eager call and bit-identical gradients (the same kernels on the same dO)."""
    explanation = torch._dynamo.explain(step)(q, k, v, w)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    leaves = lambda: [t.clone().requires_grad_() for t in (q, k, v)]  # noqa: E731
    eager_in, compiled_in = leaves(), leaves()
    eager = step(*eager_in, w)
    compiled = torch.compile(step, fullgraph=True)(*compiled_in, w)
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
    for a, b in zip(torch.autograd.grad(compiled, compiled_in), torch.autograd.grad(eager, eager_in)):
        assert a.shape == b.shape and torch.equal(a, b)


def test_torch_compile_has_no_graph_breaks_and_matches_eager():
    q, k, v, w, _, _, _ = small(seed=12)
    def step(q, k, v, w):
        return (fb.attention(q, k, v, causal=True).float() * w.float()).sum()
    check_compiles_like_eager(step, q, k, v, w)


def test_torch_func_grad_vjp_and_vmap():
    q, k, v, w, _, _, _ = small(seed=13)
    loss = lambda q, k, v: (fb.attention(q, k, v).float() * w.float()).sum()  # noqa: E731
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(loss(*leaves), leaves)
    got = torch.func.grad(loss, argnums=(0, 1, 2))(q, k, v)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    o, pullback = torch.func.vjp(lambda q: fb.attention(q, k, v), q)
    assert torch.equal(pullback(w)[0], torch.autograd.grad(fb.attention(leaves[0], k, v), leaves[0], w)[0])
    # vmap over a leading axis: the mapped axis joins the batch.
    stacked = [torch.stack([t, t.flip(2)]) for t in (q, k, v)]
    mapped = torch.func.vmap(fb.attention)(*stacked)
    for i in range(2):
        assert torch.equal(mapped[i], fb.attention(*(s[i] for s in stacked)))


def test_torch_func_grad_of_grad_runs_bob():
    q, k, v, w, vec, _, _ = small(seed=14)
    def loss(q):
        return (fb.attention(q, k, v, causal=True).float() * w.float()).sum()
    hvp = torch.func.grad(lambda q: (torch.func.grad(loss)(q).float() * vec.float()).sum())(q)
    ref_loss = lambda q: (reference_attention(q, k.double(), v.double(), causal=True) * w.double()).sum()  # noqa: E731
    q64 = q.double().requires_grad_()
    g, = torch.autograd.grad(ref_loss(q64), q64, create_graph=True)
    ref, = torch.autograd.grad((g * vec.double()).sum(), q64)
    assert rel(hvp, ref) <= 5e-3


def _record_launches(monkeypatch):
    """Patches the launches of flashbob.torch._launch to record (kernel, how it was reached):
    "op" when through an operator's body (its custom_op dispatch), else "direct"."""
    from flashbob.torch import _launch
    launches = []
    bodies = {"_forward_body", "_backward_body", "_bob_body", "_forward_jvp_body"}

    def via():
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_name in bodies and frame.f_code.co_filename.endswith("_ops.py"):
                return "op"
            frame = frame.f_back
        return "direct"

    for name in ("forward", "backward", "bob", "forward_jvp"):
        kernel = getattr(_launch, name)
        monkeypatch.setattr(_launch, name, lambda *a, _kernel=kernel, _name=name:
                            (launches.append((_name, via())), _kernel(*a))[1])
    return launches


def test_eager_calls_skip_the_operator_dispatch_and_transforms_still_see_the_operators(monkeypatch):
    # Eagerly, attention() and its derivatives launch the kernels without the operators'
    # dispatch (the custom_op's dispatch costs more host time than the launch); under a dispatch
    # mode or vmap the operators run, so that those see them. Either way the same kernels:
    # identical values.
    from flashbob.torch import _autograd
    q, k, v, w, vec, _, _ = small(seed=21)
    launches = _record_launches(monkeypatch)

    def hvp():
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        o = fb.attention(*leaves, causal=True)
        g, = torch.autograd.grad((o.float() * w.float()).sum(), leaves[0], create_graph=True)
        h, = torch.autograd.grad((g.float() * vec.float()).sum(), leaves[0])
        return o, g, h

    with torch.no_grad():
        fb.attention(q, k, v, causal=True)
    assert launches == [("forward", "direct")]
    launches.clear()
    eager = hvp()
    # The forward, the first backward, BoB: nothing else (before O entered the backward without
    # its autograd edge, the HVP's walk reached the forward's node and ran a backward of zeros).
    assert launches == [("forward", "direct"), ("backward", "direct"), ("bob", "direct")]
    launches.clear()
    with monkeypatch.context() as m:
        m.setattr(_autograd, "plain", lambda *tensors: False)
        through_ops = hvp()
    assert launches == [("forward", "op"), ("backward", "op"), ("bob", "op")]
    launches.clear()
    for a, b in zip(eager, through_ops):
        assert torch.equal(a, b)

    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Seen() as seen:
        o = fb.attention(q, k, v, causal=True)
    assert launches == [("forward", "op")] and "flashbob.forward.default" in seen.ops
    assert torch.equal(o, eager[0])
    launches.clear()
    # A mode entered between the forward and the backward sees the backward's operator.
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = fb.attention(*leaves, causal=True)
    with Seen() as seen:
        g, = torch.autograd.grad((o.float() * w.float()).sum(), leaves[0])
    assert launches == [("forward", "direct"), ("backward", "op")]
    assert "flashbob.backward.default" in seen.ops and torch.equal(g, eager[1])
    launches.clear()
    loss = lambda q: (fb.attention(q, k, v, causal=True).float() * w.float()).sum()  # noqa: E731
    # torch.func.grad records the autograd.Function and runs its forward and backward below its
    # level, on plain tensors: direct calls there are expected, and the gradient is the same.
    g = torch.func.grad(loss)(q)
    assert launches == [("forward", "direct"), ("backward", "direct")]
    assert torch.equal(g, eager[1])
    launches.clear()
    batched = torch.func.vmap(lambda *t: fb.attention(*t, causal=True))(q[None], k[None], v[None])
    assert launches == [("forward", "op")]
    assert torch.equal(batched[0], eager[0])


def test_eager_chain_keeps_autograd_guarantees():
    """What the eager chain must keep of autograd: an input changed in place between the forward
    and the backward is refused (the kernels' inputs are saved as autograd checks them), L is
    not differentiable, a backward without create_graph records nothing, and forward-mode AD on
    dual tensors (torch.autograd.forward_ad) still gets the forward's JVP."""
    q, k, v, w, tq, tk, tv = inputs(1, 96, 96, 64, torch.bfloat16, seed=47)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = fb.attention(*leaves)
    with torch.no_grad():
        leaves[1].add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        o.backward(w)

    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o, lse = fb.attention(*leaves, return_lse=True)
    assert o.requires_grad and not lse.requires_grad
    dq, dk, dv = torch.autograd.grad(o, leaves, w)
    assert dq.grad_fn is None and not dq.requires_grad
    high = [t.double().requires_grad_() for t in (q, k, v)]
    refs = torch.autograd.grad(reference_attention(*high), high, w.double())
    for got, ref in zip((dq, dk, dv), refs):
        assert rel(got, ref) <= 5e-3, rel(got, ref)

    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, t) for x, t in ((q, tq), (k, tk), (v, tv))]
        to = fwAD.unpack_dual(fb.attention(*duals, causal=True)).tangent
    assert to is not None
    _, to64 = torch.func.jvp(lambda q, k, v: reference_attention(q, k, v, causal=True),
                             tuple(t.double() for t in (q, k, v)), tuple(t.double() for t in (tq, tk, tv)))
    assert rel(to, to64) <= 5e-3, rel(to, to64)


def odd_layout(t, kind):
    """The same values in a layout the kernels cannot read as is."""
    if kind == "transposed":   # stride(-1) != 1 (q given as x.transpose(-1, -2))
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if kind == "offset":       # a view starting one element into its storage: not 16-byte aligned
        buf = torch.empty(t.numel() + 1, device=t.device, dtype=t.dtype)
        buf[1:] = t.flatten()
        return buf[1:].view(t.shape)
    if kind == "bshd":         # (batch, seq, heads, dim) storage seen as (batch, heads, seq, dim)
        return t.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    raise ValueError(kind)


@pytest.mark.parametrize("kinds", [("transposed", "offset", "bshd"), ("bshd", "transposed", "offset")])
def test_odd_layouts_through_grad_of_grad(kinds):
    """Inputs the operator has to copy: every derivative, second order included, still matches
    float64 (a copy saved inside the autograd node used to lose gQ's second-order term)."""
    t = inputs(2, 96, 160, 64, torch.bfloat16, seed=21)
    # dO broadcast over heads (stride 0), as from loss = o.sum(dim=1).
    t[3] = t[3][:, :1].expand(t[3].shape).contiguous()
    low = [odd_layout(x, kind).detach().requires_grad_() for x, kind in zip(t[:3], kinds)]
    low.append(t[3][:, :1].expand(t[3].shape).detach().requires_grad_())
    low += [x.clone() for x in t[4:]]
    high = [x.double().requires_grad_() for x in t]
    got = second_order(fb.attention, *low, True)
    ref = second_order(reference_attention, *high, True)
    for name, a, b in zip(["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"], got, ref):
        assert rel(a, b) <= TOL[torch.bfloat16], f"{kinds} {name}: {rel(a, b):.2e}"


PRECOMPILE_SCRIPT = """
import logging, random, sys, torch
import flashbob.torch as fb
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.levelname, record.getMessage()))
logging.getLogger("flashbob").addHandler(Keep())
logging.getLogger("flashbob").setLevel(logging.INFO)
fb.precompile(1, 2, 96, 128, 64, causal=True, ops=("forward", "backward", "bob"))
print("PRECOMPILED", records)
records.clear()
fb.precompile(1, 2, 96, 128, 64, causal=True, scale=0.07, ops=("forward", "backward", "bob"))
print("PRECOMPILED_SCALE", records)
records.clear()
fb.precompile(1, 2, 96, 128, 64, causal=True, heads_kv=1, ops=("forward", "backward", "bob"))
print("PRECOMPILED_GQA", records)
records.clear()
fb.precompile(3, 2, 96, 128, 64, causal=True, varlen=True, ops=("forward", "backward", "bob"))
print("PRECOMPILED_VARLEN", records)
records.clear()
g = torch.Generator(device="cuda").manual_seed(31)
q, k, v, do, uq = (torch.randn(1, 2, n, 64, device="cuda", generator=g, dtype=torch.bfloat16)
                   for n in (96, 128, 128, 96, 96))
q.requires_grad_()
for scale in (None, 0.05 + random.random() * 0.01):  # a scale never seen: 0.07's kernels
    o = fb.attention(q, k, v, causal=True, scale=scale)
    dq, = torch.autograd.grad(o, q, do, create_graph=True)
    torch.autograd.grad(dq, q, uq)
o = fb.attention(q, k[:, :1], v[:, :1], causal=True)  # multi-query: the _gqa kernels
dq, = torch.autograd.grad(o, q, do, create_graph=True)
torch.autograd.grad(dq, q, uq)
# A packed batch of three sequences (query lengths 40, 0, 56; key lengths 60, 40, 28).
cu_q = torch.tensor([0, 40, 40, 96], dtype=torch.int32, device="cuda")
cu_k = torch.tensor([0, 60, 100, 128], dtype=torch.int32, device="cuda")
qp = q[0].transpose(0, 1).detach().contiguous().requires_grad_()
kp, vp, dop, uqp = (t[0].transpose(0, 1).contiguous() for t in (k, v, do, uq))
o = fb.attention_varlen(qp, kp, vp, cu_q, cu_k, 56, 60, causal=True)
dq, = torch.autograd.grad(o, qp, dop, create_graph=True)
torch.autograd.grad(dq, qp, uqp)
torch.cuda.synchronize()
print("CALLS", records)
"""


def test_precompile_compiles_what_the_calls_run_and_logs_it(tmp_path):
    """precompile() compiles the kernels of the ops, each reported on the "flashbob" logger at
    INFO as "compiling <kind> (i/n): <kernel>" (its place among the ops' kernels), and the calls
    that follow compile nothing more. The default scale has kernels of its own (its values
    compiled in); every other scale runs one set, which reads it from its arguments: after a
    precompile at one such scale, a call at a scale never seen compiles nothing; grouped-query
    problems (heads_kv) and packed batches (varlen=True) have kernels of their own, precompiled
    alike. A process of its own with an empty cache directory, so every kernel is new to it."""
    env = dict(os.environ, FLASHBOB_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", PRECOMPILE_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith(("PRECOMPILED", "CALLS")))
    for key, scale_argument, grouped, varlen in (("PRECOMPILED", False, False, False),
                                                 ("PRECOMPILED_SCALE", True, False, False),
                                                 ("PRECOMPILED_GQA", False, True, False),
                                                 ("PRECOMPILED_VARLEN", False, False, True)):
        precompiled = [m for level, m in ast.literal_eval(lines[key]) if level == "INFO"]
        steps = sorted(m.split(":")[1].strip() for m in precompiled if m.startswith("flashbob: compiling "))
        # One call for the three ops: each kernel's place among their five.
        assert steps == ["compiling bob_kv (5/5)", "compiling bob_q (4/5)", "compiling bwd_kv (3/5)",
                         "compiling bwd_q (2/5)", "compiling fwd (1/5)"], precompiled
        for m in precompiled:
            kind, kernel = m.split()[2], m.split(": ")[-1]
            assert kernel.startswith(kind + "_d64_"), m  # names the kernel compiled
            assert ("_scalearg_" in kernel) == scale_argument, m
            assert ("_gqa_" in kernel) == grouped, m
            assert ("_varlen_" in kernel) == varlen, m
    assert not [m for _, m in ast.literal_eval(lines["CALLS"]) if "compiling" in m]
    with pytest.raises(ValueError, match="ops must be among"):
        fb.precompile(1, 1, 64, 64, 64, ops=("sideways",))


def test_forward_mode_jvp_and_forward_over_reverse_hvp():
    """torch.func.jvp through attention (BoB's gdO at u = the tangent) and an HVP as jvp of grad
    (BoB's Hessian term plus the backward of dO's tangent), both against float64."""
    q, k, v, w, tq, tk, tv = inputs(2, 96, 160, 64, torch.bfloat16, seed=41)  # w: like O
    _, to = torch.func.jvp(lambda q, k, v: fb.attention(q, k, v, causal=True), (q, k, v), (tq, tk, tv))
    _, to64 = torch.func.jvp(lambda q, k, v: reference_attention(q, k, v, causal=True),
                             tuple(t.double() for t in (q, k, v)), tuple(t.double() for t in (tq, tk, tv)))
    assert rel(to, to64) <= 5e-3, rel(to, to64)

    loss = lambda q: (fb.attention(q, k, v, causal=True).float() * w.float()).sum()  # noqa: E731
    loss64 = lambda q: (reference_attention(q, k.double(), v.double(), causal=True) * w.double()).sum()  # noqa: E731
    _, hvp = torch.func.jvp(torch.func.grad(loss), (q,), (tq,))
    _, hvp64 = torch.func.jvp(torch.func.grad(loss64), (q.double(),), (tq.double(),))
    assert rel(hvp, hvp64) <= 5e-3, rel(hvp, hvp64)
    # The same HVP by reverse over reverse.
    q64 = q.clone().requires_grad_()
    g, = torch.autograd.grad(loss(q64), q64, create_graph=True)
    rr, = torch.autograd.grad((g.float() * tq.float()).sum(), q64)
    assert rel(hvp, rr.double()) <= 5e-3


def test_forward_mode_runs_the_forward_and_its_jvp_in_one_kernel(monkeypatch):
    """Under torch.func.jvp alone, and under eager forward-mode AD, the forward defers its kernel
    to the forward-mode rule, which computes O, L and tO in one sweep (fwd_dual): O (the primal
    output, written by that rule) and tO both against float64, and the separate kernels not run.
    Nested transforms (vmap of jvp) keep the two kernels."""
    from flashbob.torch import _launch
    import torch.autograd.forward_ad as fwAD
    calls = {"forward": 0, "forward_jvp": 0, "forward_dual": 0}
    for name in calls:
        def counted(*args, _name=name, _fn=getattr(_launch, name)):
            calls[_name] += 1
            return _fn(*args)
        monkeypatch.setattr(_launch, name, counted)
    q, k, v, w, tq, tk, tv = inputs(2, 96, 160, 64, torch.bfloat16, seed=53)
    f64 = lambda q, k, v: reference_attention(q, k, v, causal=True)  # noqa: E731
    o64, to64 = torch.func.jvp(f64, tuple(t.double() for t in (q, k, v)),
                               tuple(t.double() for t in (tq, tk, tv)))

    o, to = torch.func.jvp(lambda q, k, v: fb.attention(q, k, v, causal=True), (q, k, v),
                           (tq, tk, tv))
    assert calls == {"forward": 0, "forward_jvp": 0, "forward_dual": 1}, calls
    assert rel(o, o64) <= 5e-3 and rel(to, to64) <= 5e-3, (rel(o, o64), rel(to, to64))

    # A tangent on k alone (q and v closed over): still one kernel, the other tangents zero.
    _, to_k = torch.func.jvp(lambda k: fb.attention(q, k, v, causal=True), (k,), (tk,))
    _, to_k64 = torch.func.jvp(lambda k: f64(q.double(), k, v.double()), (k.double(),),
                               (tk.double(),))
    assert calls["forward_dual"] == 2 and rel(to_k, to_k64) <= 5e-3, rel(to_k, to_k64)

    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, t) for x, t in ((q, tq), (k, tk), (v, tv))]
        primal, tangent = fwAD.unpack_dual(fb.attention(*duals, causal=True))
    assert calls["forward_dual"] == 3 and calls["forward"] == 0, calls
    assert rel(primal, o64) <= 5e-3 and rel(tangent, to64) <= 5e-3

    # The deferred forward's O also feeds a backward: grad through the primal output of jvp.
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o, to = torch.func.jvp(lambda q, k, v: fb.attention(q, k, v, causal=True), tuple(leaves),
                           (tq, tk, tv))
    dq, = torch.autograd.grad((o.float() * w.float()).sum(), leaves[0])
    high = [t.double().requires_grad_() for t in (q, k, v)]
    dq64, = torch.autograd.grad((f64(*high) * w.double()).sum(), high[0])
    assert rel(dq, dq64) <= 5e-3, rel(dq, dq64)

    before = dict(calls)
    torch.func.vmap(lambda q, k, v, tq, tk, tv: torch.func.jvp(
        lambda q, k, v: fb.attention(q, k, v, causal=True), (q, k, v), (tq, tk, tv)))(
        *(t.unsqueeze(0) for t in (q, k, v, tq, tk, tv)))
    assert calls["forward_dual"] == before["forward_dual"], calls


def test_third_derivative_through_forward_mode_is_refused():
    q, k, v, w, tq, _, _ = inputs(1, 64, 64, 64, torch.bfloat16, seed=43)
    loss = lambda q: (fb.attention(q, k, v).float() * w.float()).sum()  # noqa: E731
    hvp_of = lambda q: (torch.func.grad(loss)(q).float() * tq.float()).sum()  # noqa: E731
    with pytest.raises(RuntimeError, match="third derivatives"):
        torch.func.jvp(torch.func.grad(hvp_of), (q,), (tq,))


@pytest.mark.parametrize("n,d", [(176, 64), (112, 32), (144, 100)])
def test_cuda_graph_capture_of_a_new_shape_replays_like_eager(n, d):
    """A grad-of-grad step (forward, backward with create_graph, BoB) captured in a CUDA graph at
    a shape never run before: N = 176 (kernels compiled by earlier tests, new tensors and tensor
    maps), d = 32 (kernels compiled during the capture) and d = 100 (zero-padded copies: their
    stream-ordered allocation, memset and copies are captured too). Nothing in a call may synchronize or
    copy to the device (capture would fail and leave the process's CUDA state broken). The
    replay must equal eager, also after new values are copied into the captured inputs."""
    g = torch.Generator(device="cuda").manual_seed(n + d)
    def r(rows):
        return torch.randn(1, 2, rows, d, device="cuda", generator=g, dtype=torch.bfloat16)
    q, k, v, do, uq = r(n), r(n + 16), r(n + 16), r(n), r(n)
    q.requires_grad_()

    def step(q, k, v, do, uq):
        o = fb.attention(q, k, v, causal=True)
        dq, = torch.autograd.grad(o, q, do, create_graph=True)
        hvp, = torch.autograd.grad(dq, q, uq)
        return o, dq, hvp

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(q, k, v, do, uq)
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        eager = step(q.detach().clone().requires_grad_(), k, v, do, uq)
        for name, a, b in zip(["O", "dQ", "HVP"], captured, eager):
            assert torch.equal(a, b), f"{name}: replay differs from eager by {rel(a, b):.2e}"
        with torch.no_grad():  # new values in the same buffers: the graph reads them
            for t in (q, k, v, do, uq):
                t.copy_(torch.randn(t.shape, device="cuda", generator=g))


_COLD_CAPTURE_SCRIPT = """
import torch, flashbob.torch as fb
g = torch.Generator(device="cuda").manual_seed(61)
q, k, v, do = (torch.randn(1, 2, 160, 128, device="cuda", generator=g).to(torch.float16)
               for _ in range(4))
q.requires_grad_()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    o = fb.attention(q, k, v, causal=True)
    dq, = torch.autograd.grad(o, q, do)
graph.replay()
o2 = fb.attention(q, k, v, causal=True)
dq2, = torch.autograd.grad(o2, q, do)
assert torch.equal(o, o2) and torch.equal(dq, dq2)
print("ok")
"""


def test_cuda_graph_capture_compiles_and_loads_kernels_the_process_never_had(tmp_path):
    """In a fresh process with an empty cache, the capture itself compiles and loads the
    kernels (module loading under capture), and the replay equals eager."""
    env = dict(os.environ, FLASHBOB_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _COLD_CAPTURE_SCRIPT], env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr


# --- packed batches of variable-length sequences (attention_varlen) ----------------------------

def offsets(lengths):
    """flash-attn's cu_seqlens: 0, then the running sums of the lengths (int32, on the GPU)."""
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device="cuda")


def packed_inputs(h, h_kv, lens_q, lens_k, d, dtype, seed):
    """q k v dO uQ uK uV packed as flash-attn's (total, heads, head_dim), the key side with h_kv
    heads."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    def r(rows, heads):
        return torch.randn(rows, heads, d, device="cuda", generator=g).to(dtype)
    n, m = sum(lens_q), sum(lens_k)
    return [r(n, h), r(m, h_kv), r(m, h_kv), r(n, h), r(n, h), r(m, h_kv), r(m, h_kv)]


def sequences(cu_seqlens_q, cu_seqlens_k):
    """Each sequence's (query rows, key rows) as slices of the packed tensors."""
    bq, bk = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    return [(slice(bq[s], bq[s + 1]), slice(bk[s], bk[s + 1])) for s in range(len(bq) - 1)]


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                     causal=False, scale=None, window_size=(-1, -1)):
    """Each sequence on its own through reference_attention (float64 autograd, the mask in its
    own rows), concatenated; a sequence without keys gives 0 (so does reference_attention, but
    softmax over an empty axis is not something to rely on)."""
    outs = []
    for rq, rk in sequences(cu_seqlens_q, cu_seqlens_k):
        if rq.stop == rq.start or rk.stop == rk.start:
            outs.append(torch.zeros_like(q[rq]))
            continue
        o = reference_attention(q[rq].transpose(0, 1), k[rk].transpose(0, 1), v[rk].transpose(0, 1),
                                causal, scale, window_size)
        outs.append(o.transpose(0, 1))
    return torch.cat(outs)


def reference_varlen_lse(q, k, cu_seqlens_q, cu_seqlens_k, causal=False, scale=None,
                         window_size=(-1, -1)):
    """(heads, total_q) float64 log-sum-exp of each query row over the keys it sees."""
    group = q.shape[1] // k.shape[1]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    left, right = window_size
    right = 0 if causal else right
    rows = []
    for rq, rk in sequences(cu_seqlens_q, cu_seqlens_k):
        n, m = rq.stop - rq.start, rk.stop - rk.start
        if n == 0 or m == 0:
            rows.append(torch.full((q.shape[1], n), float("-inf"), dtype=torch.float64, device="cuda"))
            continue
        s = scale * (q[rq].double().transpose(0, 1)
                     @ k[rk].double().repeat_interleave(group, dim=1).permute(1, 2, 0))
        offset = (torch.arange(m, device="cuda")[None, :] - torch.arange(n, device="cuda")[:, None]
                  - (m - n))
        keep = torch.ones(n, m, dtype=torch.bool, device="cuda")
        if right >= 0:
            keep &= offset <= right
        if left >= 0:
            keep &= offset >= -left
        rows.append(torch.logsumexp(s.masked_fill(~keep, float("-inf")), dim=-1))
    return torch.cat(rows, dim=-1)


def packed(attn, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """attn (attention_varlen or reference_varlen) with the batch bound, called as attention."""
    return lambda q, k, v, **options: attn(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                           max_seqlen_k, **options)


VARLEN_CASES = [  # (heads, heads_kv, query lengths, key lengths, d, causal, window_size)
    (2, 2, [37, 0, 128, 5], [64, 17, 128, 0], 64, False, (-1, -1)),  # an empty, a keyless sequence
    (4, 2, [100, 1, 0, 77, 130], [130, 1, 40, 20, 130], 64, True, (-1, -1)),  # GQA, causal, N > M
    (6, 2, [200, 64, 33], [150, 64, 90], 128, False, (24, 8)),  # a two-sided window
    (2, 1, [96, 0, 150, 3], [0, 50, 160, 70], 64, True, (30, -1)),  # multi-query, causal + left
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("h,h_kv,lens_q,lens_k,d,causal,window", VARLEN_CASES)
def test_varlen_first_and_second_derivatives(dtype, h, h_kv, lens_q, lens_k, d, causal, window):
    """attention_varlen against each sequence's own float64 attention: O, dQ, dK, dV and BoB's
    gQ, gK, gV, gdO; the rows of a sequence without keys (O, dQ, gQ, gdO) or without queries
    (dK, dV, gK, gV) exactly 0; BoB bit-identical run to run."""
    t = packed_inputs(h, h_kv, lens_q, lens_k, d, dtype, seed=h + d + sum(lens_q) + sum(lens_k))
    cu_q, cu_k = offsets(lens_q), offsets(lens_k)
    longest = (max(lens_q), max(lens_k))
    attn = packed(fb.attention_varlen, cu_q, cu_k, *longest)
    low, high = both(t)
    got = second_order(attn, *low, causal, window_size=window)
    ref = second_order(packed(reference_varlen, cu_q, cu_k, *longest), *high, causal,
                       window_size=window)
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    for name, a, b in zip(names, got, ref):
        assert a.shape == b.shape, name
    errors = {name: rel(a, b) for name, a, b in zip(names, got, ref)}
    print(dtype, h, h_kv, lens_q, lens_k, d, causal, window, {k: f"{v:.2e}" for k, v in errors.items()})
    for name, err in errors.items():
        assert math.isfinite(err) and err <= TOL[dtype], f"{name}: {err:.2e}"
    o, dq, dk, dv, gq, gk, gv, gdo = got
    for (rq, rk), n, m in zip(sequences(cu_q, cu_k), lens_q, lens_k):
        if m == 0:
            for name, x in (("O", o), ("dQ", dq), ("gQ", gq), ("gdO", gdo)):
                assert bool((x[rq] == 0).all()), f"{name} of a keyless sequence"
        if n == 0:
            for name, x in (("dK", dk), ("dV", dv), ("gK", gk), ("gV", gv)):
                assert bool((x[rk] == 0).all()), f"{name} of a sequence without queries"
    again = second_order(attn, *both(t)[0], causal, window_size=window)
    for name, a, b in zip(names, got, again):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (False, (24, 8))])
def test_varlen_of_equal_lengths_matches_the_dense_batch(causal, window):
    """A packed batch of equal-length sequences is the dense batch laid out (batch, seq, heads,
    d): attention_varlen and attention() on its (batch, heads, seq, d) views agree in O, L and
    every derivative (the same tiles in the same order: expected bit-identical, held to rounding)."""
    b, h, h_kv, n, m, d = 3, 4, 2, 96, 160, 64
    t = packed_inputs(h, h_kv, [n] * b, [m] * b, d, torch.bfloat16, seed=51 + int(causal) + window[0])
    cu_q, cu_k = offsets([n] * b), offsets([m] * b)
    attn = packed(fb.attention_varlen, cu_q, cu_k, n, m)

    def dense(x):  # (b * rows, heads, d) memory as (b, heads, rows, d): no copy
        return x.view(b, x.shape[0] // b, x.shape[1], d).transpose(1, 2)

    def unpack(x):  # back to (b * rows, heads, d)
        return x.transpose(1, 2).reshape(-1, x.shape[1], d)

    got = second_order(attn, *both(t)[0], causal, window_size=window)
    low = [dense(x).detach().requires_grad_() if i < 4 else dense(x) for i, x in enumerate(t)]
    ref = [unpack(x) for x in second_order(fb.attention, *low, causal, window_size=window)]
    o, lse = fb.attention_varlen(*t[:3], cu_q, cu_k, n, m, causal=causal, window_size=window,
                                 return_lse=True)
    o_dense, lse_dense = fb.attention(*(dense(x) for x in t[:3]), causal=causal,
                                      window_size=window, return_lse=True)
    lse_dense = lse_dense.transpose(0, 1).reshape(h, b * n)
    names = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]
    print(causal, window, "bitwise:", {name: torch.equal(a, r) for name, a, r in zip(names, got, ref)},
          "L bitwise:", torch.equal(lse, lse_dense))
    for name, a, r in zip(names, got, ref):
        assert a.shape == r.shape and rel(a, r) <= 1e-3, f"{name}: {rel(a, r):.2e}"
    assert torch.equal(o, got[0])
    seen = torch.isfinite(lse_dense)
    assert torch.equal(torch.isfinite(lse), seen)
    assert (lse[seen] - lse_dense[seen]).abs().max().item() <= 1e-5


def test_varlen_return_lse_is_the_natural_log_sum_exp():
    """L is (heads, total_q) float32, each row's log-sum-exp over its own sequence's keys
    (float64 reference), -inf for rows that see no key (a keyless sequence, causal with N > M);
    O is the same as without it, contiguous in q's layout, 0 on a keyless sequence's rows."""
    lens_q, lens_k = [70, 0, 33, 96, 4], [40, 12, 33, 0, 100]
    q, k, v = packed_inputs(4, 2, lens_q, lens_k, 64, torch.bfloat16, seed=53)[:3]
    cu_q, cu_k = offsets(lens_q), offsets(lens_k)
    for causal in (False, True):
        o, lse = fb.attention_varlen(q, k, v, cu_q, cu_k, 96, 100, causal=causal, scale=0.3,
                                     return_lse=True)
        assert o.shape == q.shape and o.is_contiguous()
        assert lse.shape == (4, sum(lens_q)) and lse.dtype == torch.float32 and not lse.requires_grad
        assert torch.equal(o, fb.attention_varlen(q, k, v, cu_q, cu_k, 96, 100, causal=causal, scale=0.3))
        ref = reference_varlen_lse(q, k, cu_q, cu_k, causal, 0.3)
        seen = torch.isfinite(ref)
        assert torch.equal(torch.isfinite(lse), seen)
        assert (lse.double()[seen] - ref[seen]).abs().max().item() <= 1e-4
        assert bool((lse[~seen] == float("-inf")).all())
        assert bool((o[103:199] == 0).all())  # sequence 3 has no keys


def test_varlen_forward_mode_jvp_and_forward_over_reverse_hvp():
    """torch.func.jvp through attention_varlen (forward_jvp on the packed batch), jvp of grad
    (BoB's Hessian term) and grad of grad, against float64 per-sequence references."""
    lens_q, lens_k = [64, 0, 150, 9], [80, 30, 150, 0]
    q, k, v, w, tq, tk, tv = packed_inputs(4, 2, lens_q, lens_k, 64, torch.bfloat16, seed=55)
    cu_q, cu_k = offsets(lens_q), offsets(lens_k)
    attn = packed(fb.attention_varlen, cu_q, cu_k, 150, 150)
    ref = packed(reference_varlen, cu_q, cu_k, 150, 150)
    _, to = torch.func.jvp(lambda q, k, v: attn(q, k, v, causal=True), (q, k, v), (tq, tk, tv))
    _, to64 = torch.func.jvp(lambda q, k, v: ref(q, k, v, causal=True),
                             tuple(t.double() for t in (q, k, v)), tuple(t.double() for t in (tq, tk, tv)))
    assert rel(to, to64) <= 5e-3, rel(to, to64)

    loss = lambda q: (attn(q, k, v, causal=True).float() * w.float()).sum()  # noqa: E731
    loss64 = lambda q: (ref(q, k.double(), v.double(), causal=True) * w.double()).sum()  # noqa: E731
    _, hvp = torch.func.jvp(torch.func.grad(loss), (q,), (tq,))
    _, hvp64 = torch.func.jvp(torch.func.grad(loss64), (q.double(),), (tq.double(),))
    assert rel(hvp, hvp64) <= 5e-3, rel(hvp, hvp64)
    rr = torch.func.grad(lambda q: (torch.func.grad(loss)(q).float() * tq.float()).sum())(q)
    assert rel(rr, hvp64) <= 5e-3, rel(rr, hvp64)


def test_varlen_torch_func_grad_vjp_and_vmap():
    """torch.func.grad and vjp equal autograd's; vmap over q, k, v (the slices share the batch's
    sequences, the mapped axis joins the heads) equals each slice on its own; vmap over the
    offsets is refused, naming them."""
    lens_q, lens_k = [40, 0, 72], [56, 20, 72]
    q, k, v, w, _, _, _ = packed_inputs(4, 2, lens_q, lens_k, 64, torch.bfloat16, seed=57)
    cu_q, cu_k = offsets(lens_q), offsets(lens_k)
    attn = packed(fb.attention_varlen, cu_q, cu_k, 72, 72)
    loss = lambda q, k, v: (attn(q, k, v).float() * w.float()).sum()  # noqa: E731
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(loss(*leaves), leaves)
    got = torch.func.grad(loss, argnums=(0, 1, 2))(q, k, v)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    _, pullback = torch.func.vjp(lambda q: attn(q, k, v), q)
    assert torch.equal(pullback(w)[0], torch.autograd.grad(attn(leaves[0], k, v), leaves[0], w)[0])
    stacked = [torch.stack([t, t.flip(0)]) for t in (q, k, v)]
    mapped = torch.func.vmap(attn)(*stacked)
    for i in range(2):
        assert torch.equal(mapped[i], attn(*(s[i] for s in stacked)))
    with pytest.raises((ValueError, RuntimeError), match="vmap over cu_seqlens"):
        torch.func.vmap(lambda cu: fb.attention_varlen(q, k, v, cu, cu_k, 72, 72))(torch.stack([cu_q, cu_q]))


def test_varlen_torch_compile_has_no_graph_breaks_and_matches_eager():
    lens_q, lens_k = [40, 0, 72, 9], [56, 20, 72, 0]
    q, k, v, w, _, _, _ = packed_inputs(4, 2, lens_q, lens_k, 64, torch.bfloat16, seed=59)
    cu_q, cu_k = offsets(lens_q), offsets(lens_k)

    def step(q, k, v, w):
        o = fb.attention_varlen(q, k, v, cu_q, cu_k, 72, 72, causal=True, window_size=(32, -1))
        return (o.float() * w.float()).sum()
    check_compiles_like_eager(step, q, k, v, w)


def test_opcheck_each_operator_on_a_packed_batch():
    """The ops with a packed config, on the (1, heads, total, d) views attention_varlen passes
    (read in place, no copy): schema, fake implementation (its outputs in (total, heads, d)
    memory, as the real ones), autograd registration, AOT dispatch."""
    lens_q, lens_k = [40, 0, 56], [48, 16, 64]
    t = packed_inputs(4, 2, lens_q, lens_k, 64, torch.bfloat16, seed=61)
    views = [x.unsqueeze(0).transpose(1, 2) for x in t]
    from flashbob.torch._launch import readable as _readable
    assert all(_readable(x, packed=True) is x for x in views)
    config = (True, -1, -1, 0.0, offsets(lens_q), offsets(lens_k), 56, 64)
    q, k, v, do = (x.detach().requires_grad_() for x in views[:4])
    torch.library.opcheck(torch.ops.flashbob.forward.default, (q, k, v, *config))
    window = (False, 20, 4, 0.0, *config[4:])
    torch.library.opcheck(torch.ops.flashbob.forward.default, (q, k, v, *window))
    o, lse = torch.ops.flashbob.forward(q.detach(), k.detach(), v.detach(), *config)
    assert o.shape == q.shape and o.transpose(1, 2).is_contiguous() and lse.shape == (1, 4, 96)
    torch.library.opcheck(torch.ops.flashbob.backward.default, (q, k, v, o, lse, do, *config))
    plain = [x.detach() for x in (q, k, v, o, lse, do)] + views[4:]
    torch.library.opcheck(torch.ops.flashbob.bob.default, (*plain, *config),
                          test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(torch.ops.flashbob.forward_jvp.default, (*plain[:5], *plain[6:], *config),
                          test_utils=("test_schema", "test_faketensor"))
    to = torch.ops.flashbob.forward_jvp(*plain[:5], *plain[6:], *config)
    gdo = torch.ops.flashbob.bob(*plain, *config)[3]
    assert rel(to, gdo) <= TOL[torch.bfloat16]


def test_varlen_cuda_graph_capture_replays_like_eager():
    """A packed grad-of-grad step captured in a CUDA graph: the offsets are not read back while
    capturing (no synchronization), and the replay equals eager."""
    lens_q, lens_k = [48, 0, 80], [64, 32, 80]
    q, k, v, do, uq, _, _ = packed_inputs(2, 2, lens_q, lens_k, 64, torch.bfloat16, seed=63)
    cu_q, cu_k = offsets(lens_q), offsets(lens_k)
    q.requires_grad_()

    def step(q):
        o = fb.attention_varlen(q, k, v, cu_q, cu_k, 80, 80, causal=True)
        dq, = torch.autograd.grad(o, q, do, create_graph=True)
        hvp, = torch.autograd.grad(dq, q, uq)
        return o, dq, hvp
    step(q)  # the kernels compiled and loaded before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(q)
    graph.replay()
    torch.cuda.synchronize()
    eager = step(q.detach().clone().requires_grad_())
    for name, a, b in zip(["O", "dQ", "HVP"], captured, eager):
        assert torch.equal(a, b), f"{name}: replay differs from eager by {rel(a, b):.2e}"


def test_varlen_validation_names_the_argument():
    q = torch.randn(64, 2, 64, device="cuda", dtype=torch.bfloat16)
    cu = offsets([30, 34])
    call = lambda *args, **kw: fb.attention_varlen(*args, **kw)  # noqa: E731
    with pytest.raises(ValueError, match=r"q must be \(total, heads, head_dim\)"):
        call(q[None], q, q, cu, cu, 34, 34)
    with pytest.raises(TypeError, match="k must be bfloat16 or float16"):
        call(q, q.float(), q.float(), cu, cu, 34, 34)
    with pytest.raises(TypeError, match="q, k, v must share a dtype"):
        call(q, q.half(), q.half(), cu, cu, 34, 34)
    with pytest.raises(ValueError, match="differ in head_dim"):
        x = torch.randn(64, 2, 32, device="cuda", dtype=torch.bfloat16)
        call(q, x, x, cu, cu, 34, 34)
    with pytest.raises(ValueError, match=r"k's heads \(3\) must divide q's \(2\)"):
        x = torch.randn(64, 3, 64, device="cuda", dtype=torch.bfloat16)
        call(q, x, x, cu, cu, 34, 34)
    with pytest.raises(TypeError, match="cu_seqlens_q must be int32"):
        call(q, q, q, cu.long(), cu, 34, 34)
    with pytest.raises(TypeError, match="cu_seqlens_k must be int32"):
        call(q, q, q, cu, cu.long(), 34, 34)
    with pytest.raises(TypeError, match="cu_seqlens_q must be a torch.Tensor"):
        call(q, q, q, [0, 30, 64], cu, 34, 34)
    with pytest.raises(ValueError, match="cu_seqlens_k must be 1-D"):
        call(q, q, q, cu, cu[None], 34, 34)
    with pytest.raises(ValueError, match="cu_seqlens_q must be on q's device"):
        call(q, q, q, cu.cpu(), cu, 34, 34)
    with pytest.raises(ValueError, match="cu_seqlens_q and cu_seqlens_k must have the same length"):
        call(q, q, q, cu, offsets([30, 30, 4]), 34, 34)
    with pytest.raises(ValueError, match=r"batch \+ 1 >= 2 offsets"):
        call(q, q, q, cu[:1], cu[:1], 34, 34)
    with pytest.raises(TypeError, match="max_seqlen_q must be an int"):
        call(q, q, q, cu, cu, 34.0, 34)
    with pytest.raises(TypeError, match="max_seqlen_k must be an int"):
        call(q, q, q, cu, cu, 34, torch.tensor(34))
    with pytest.raises(ValueError, match="max_seqlen_q must be positive"):
        call(q, q, q, cu, cu, 0, 34)
    with pytest.raises(ValueError, match=r"window_size's left side \(65\) is larger"):
        call(q, q, q, cu, cu, 34, 34, window_size=(65, 0))
    with pytest.raises(ValueError, match="q holds no rows"):
        call(q[:0], q, q, offsets([0, 0]), cu, 1, 34)
    # The offsets' contents are the C API's to check (it reads them back); its errors name them.
    with pytest.raises(ValueError, match="cu_seqlens_q must not decrease"):
        call(q, q, q, torch.tensor([0, 40, 30, 64], dtype=torch.int32, device="cuda"),
             offsets([20, 20, 24]), 64, 64)
    with pytest.raises(ValueError, match=r"cu_seqlens_q\[2\] = 60 must be the total rows"):
        call(q, q, q, offsets([30, 30]), cu, 34, 34)
    with pytest.raises(ValueError, match=r"cu_seqlens_k\[2\] = 60 must be the total rows"):
        call(q, q, q, cu, offsets([30, 30]), 34, 34)
    with pytest.raises(ValueError, match=r"cu_seqlens_q\[0\] = 4 must be 0"):
        call(q, q, q, torch.tensor([4, 30, 64], dtype=torch.int32, device="cuda"), cu, 34, 34)
    with pytest.raises(ValueError, match="more than max_seqlen_q = 20"):
        call(q, q, q, cu, cu, 20, 34)
    # A bound past the totals (flash-attn takes any bound) is clamped to them: the same result.
    assert torch.equal(call(q, q, q, cu, cu, 10_000, 10_000), call(q, q, q, cu, cu, 34, 34))
