"""flashbob.torch.attention against a float64 reference on the same bf16/fp16-rounded inputs:
forward, first derivatives, second derivatives (grad of grad), a Hessian-vector product and a
meta-learning outer gradient; plus argument validation. Needs a CUDA GPU and torch."""

import json
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


# --- the operators as torch sees them -----------------------------------------------------------

def small(dtype=torch.bfloat16, seed=11, h=2, n=96, m=128, d=64):
    return inputs(h, n, m, d, dtype, seed)


def test_opcheck_each_operator():
    """Schema, fake (meta) implementation, autograd registration and AOT dispatch of each op."""
    q, k, v, do, uq, uk, uv = small()
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    torch.library.opcheck(torch.ops.flashbob.forward.default, (q, k, v, True, 0.0))
    o, lse = torch.ops.flashbob.forward(q.detach(), k.detach(), v.detach(), True, 0.0)
    do.requires_grad_()
    torch.library.opcheck(torch.ops.flashbob.backward.default, (q, k, v, o, lse, do, True, 0.0))
    # BoB's autograd formula raises (third derivatives), so its check runs without gradients.
    plain = [t.detach() for t in (q, k, v, o, lse, do, uq, uk, uv)]
    torch.library.opcheck(torch.ops.flashbob.bob.default, (*plain, True, 0.0),
                          test_utils=("test_schema", "test_faketensor"))


def test_torch_compile_has_no_graph_breaks_and_matches_eager():
    q, k, v, w, _, _, _ = small(seed=12)
    def step(q, k, v, w):
        return (fb.attention(q, k, v, causal=True).float() * w.float()).sum()
    explanation = torch._dynamo.explain(step)(q, k, v, w)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    leaves = lambda: [t.clone().requires_grad_() for t in (q, k, v)]  # noqa: E731
    eager_in, compiled_in = leaves(), leaves()
    eager = step(*eager_in, w)
    compiled = torch.compile(step, fullgraph=True)(*compiled_in, w)
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
    for a, b in zip(torch.autograd.grad(compiled, compiled_in), torch.autograd.grad(eager, eager_in)):
        assert torch.equal(a, b)  # the same kernels on the same dO


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


_PRECOMPILE_SCRIPT = """
import json, logging, random, torch, flashbob.torch as fb
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logger = logging.getLogger("flashbob")
logger.setLevel(logging.DEBUG)
logger.addHandler(Keep())
fb.precompile(1, 2, 96, 128, 64, causal=True, scale=0.1, ops=("forward", "backward", "bob"))
compiled = [m for m in records if m.startswith("flashbob: compiling ")]
records.clear()
g = torch.Generator(device="cuda").manual_seed(31)
q, k, v, do, uq = (torch.randn(1, 2, n, 64, device="cuda", generator=g).to(torch.bfloat16)
                   for n in (96, 128, 128, 96, 96))
q.requires_grad_()
for scale in (0.1, 0.05 + random.random() * 0.01):  # a scale never seen: the same kernels
    o = fb.attention(q, k, v, causal=True, scale=scale)
    dq, = torch.autograd.grad(o, q, do, create_graph=True)
    torch.autograd.grad(dq, q, uq)
print(json.dumps({"compiled": compiled, "later": [m for m in records if "compiling" in m]}))
"""


def test_precompile_compiles_what_the_calls_run_and_logs_it(tmp_path):
    """precompile() compiles the kernels of the ops (each reported on the "flashbob" logger at
    DEBUG), and the calls that follow compile nothing more, whatever their scale: the softmax
    scale is a kernel argument. Run in a fresh process with an empty cache directory, so that
    every kernel is new to the process and to the disk cache."""
    env = dict(os.environ, FLASHBOB_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _PRECOMPILE_SCRIPT], env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    kinds = sorted(m.split()[2].split("_d")[0] for m in result["compiled"])
    assert kinds == ["bob_kv", "bob_q", "bwd_kv", "bwd_q", "fwd"], result["compiled"]
    assert result["later"] == [], result["later"]
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


def test_third_derivative_through_forward_mode_is_refused():
    q, k, v, w, tq, _, _ = inputs(1, 64, 64, 64, torch.bfloat16, seed=43)
    loss = lambda q: (fb.attention(q, k, v).float() * w.float()).sum()  # noqa: E731
    hvp_of = lambda q: (torch.func.grad(loss)(q).float() * tq.float()).sum()  # noqa: E731
    with pytest.raises(RuntimeError, match="third derivatives"):
        torch.func.jvp(torch.func.grad(hvp_of), (q,), (tq,))


# --- CUDA graphs: a launch is kernel launches only (tensor maps by value, no copy or sync) ------

def attention_and_grads(q, k, v, do, scale):
    o = fb.attention(q, k, v, causal=True, scale=scale)
    return (o, *torch.autograd.grad(o, (q, k, v), do))


def test_cuda_graph_captures_a_shape_never_seen_and_replays_as_eager():
    """A shape and a scale no other test uses, captured inside torch.cuda.graph with no warm-up:
    its first launches (forward, bwd_q, bwd_kv) happen during capture. The replay equals eager,
    also after new values are copied into the captured inputs; and a later eager call still
    works (a failed capture would have left the process's CUDA state broken)."""
    q, k, v, do, *_ = inputs(3, 272, 208, 64, torch.bfloat16, seed=51)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = attention_and_grads(q, k, v, do, 0.0917)
    graph.replay()
    for got, want in zip(captured, attention_and_grads(q, k, v, do, 0.0917)):
        assert torch.equal(got, want)
    fresh = inputs(3, 272, 208, 64, torch.bfloat16, seed=52)
    with torch.no_grad():
        for static, new in zip((q, k, v, do), fresh):
            static.copy_(new)
    graph.replay()
    for got, want in zip(captured, attention_and_grads(q, k, v, do, 0.0917)):
        assert torch.equal(got, want)


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
