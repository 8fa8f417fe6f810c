"""flashbob.jax.attention (and attention_varlen) against a float64 reference in jax.numpy on the
same bf16/fp16-rounded inputs: forward, first and second derivatives in both HVP idioms (reverse
over reverse, forward over reverse), jit, vmap, donation, grouped-query attention, windows, packed
batches, a transformer block's HVP and a meta-learning outer gradient; plus argument validation.

Three groups, by what they need:
  - jax only (any machine): validation, shapes, which primitives each derivative binds, the
    FFI shim against api/flashbob.h, and the differentiation rules themselves, run on CPU with
    every primitive lowered to the reference math (reference_lowerings) and held to jax's own
    autodiff of the reference;
  - a CUDA device and libflashbob.so (the `gpu` mark): everything against the real kernels.

    PYTHONPATH=python FLASHBOB_LIBRARY=build/lib/libflashbob.so \
        python3 -m pytest test/python/test_jax_attention.py
"""

import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

# JAX would otherwise take 75% of the GPU at its first use, starving the torch tests that share
# this pytest process (test/python/run-pytest.sh runs the directory).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
jax = pytest.importorskip("jax", reason="flashbob.jax needs jax and jaxlib (not installed)")
jax.config.update("jax_enable_x64", True)  # the float64 reference

import jax.numpy as jnp  # noqa: E402
from jax.interpreters import mlir  # noqa: E402

import flashbob  # noqa: E402
import flashbob.jax as fbj  # noqa: E402
from flashbob import _capi  # noqa: E402
from flashbob.jax import _ffi, _primitives  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TOL = {jnp.bfloat16: 5e-3, jnp.float16: 1e-3}
F64 = jnp.float64


def _gpu_missing():
    """Why the kernels cannot run here (None if they can)."""
    try:
        jax.devices("cuda")
    except RuntimeError as e:
        return f"jax sees no CUDA device ({str(e).splitlines()[0]})"
    try:
        _capi.library_path()
    except _capi.FlashBobError as e:
        return f"libflashbob.so is not available: {e}"
    return None


GPU_MISSING = _gpu_missing()
gpu = pytest.mark.skipif(GPU_MISSING is not None, reason=str(GPU_MISSING))


# --- the reference ------------------------------------------------------------------------------

def _keep(n, m, causal, window, cu_seqlens_q=None, cu_seqlens_k=None):
    """(n, m) mask: which key each query row sees (flash-attn's window, bottom-right aligned; in a
    packed batch, per sequence, from the offsets)."""
    left, right = window
    right = 0 if causal else right
    rows, cols = jnp.arange(n), jnp.arange(m)
    if cu_seqlens_q is None:
        keep = jnp.ones((n, m), dtype=bool)
        offset = cols[None, :] - rows[:, None] - (m - n)
    else:
        # side="right": an empty sequence's offset repeats, and a row belongs to the last of them.
        seq_q = jnp.searchsorted(cu_seqlens_q, rows, side="right") - 1
        seq_k = jnp.searchsorted(cu_seqlens_k, cols, side="right") - 1
        local_q, local_k = rows - cu_seqlens_q[seq_q], cols - cu_seqlens_k[seq_k]
        len_q = cu_seqlens_q[seq_q + 1] - cu_seqlens_q[seq_q]
        len_k = cu_seqlens_k[seq_k + 1] - cu_seqlens_k[seq_k]
        keep = seq_q[:, None] == seq_k[None, :]
        offset = local_k[None, :] - local_q[:, None] - (len_k[None, :] - len_q[:, None])
    if right >= 0:
        keep &= offset <= right
    if left >= 0:
        keep &= offset >= -left
    return keep


def reference_attention(q, k, v, causal=False, scale=None, window_size=(-1, -1),
                        cu_seqlens_q=None, cu_seqlens_k=None, return_lse=False):
    """softmax attention in jax.numpy, differentiable to any order, in the inputs' dtype. Dense
    (batch, seq, heads, d) or, with offsets, packed (total, heads, d); k, v with fewer heads are
    repeated over each group; a row that sees no key gives 0 (and L = -inf)."""
    packed = cu_seqlens_q is not None
    if packed:
        q, k, v = q[None], k[None], v[None]
    group = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = scale * jnp.einsum("bnhd,bmhd->bhnm", q, k)
    keep = _keep(q.shape[1], k.shape[1], causal, window_size, cu_seqlens_q, cu_seqlens_k)
    seen = keep.any(axis=-1)[:, None]
    # Masked scores are -inf, and an empty row's are 0 (so its softmax stays finite, then x 0).
    s = jnp.where(seen, jnp.where(keep, s, -jnp.inf), 0.0)
    e = jnp.exp(s - jax.lax.stop_gradient(s.max(axis=-1, keepdims=True)))
    p = e / e.sum(axis=-1, keepdims=True) * seen
    o = jnp.einsum("bhnm,bmhd->bnhd", p, v)
    lse = jnp.where(seen[..., 0], jax.nn.logsumexp(s, axis=-1), -jnp.inf)
    if packed:
        o, lse = o[0], lse[0]
    return (o, lse) if return_lse else o


def rel(got, ref):
    got, ref = jnp.asarray(got, F64).ravel(), jnp.asarray(ref, F64).ravel()
    return float(jnp.linalg.norm(got - ref) / jnp.linalg.norm(ref))


def inputs(shapes, dtype, seed):
    keys = jax.random.split(jax.random.PRNGKey(seed), len(shapes))
    return [jax.random.normal(key, shape, jnp.float32).astype(dtype)
            for key, shape in zip(keys, shapes)]


def problem(h, n, m, d, dtype, seed, h_kv=None, batch=1):
    """q k v dO uQ uK uV, dense."""
    kv = h if h_kv is None else h_kv
    qs, ks = (batch, n, h, d), (batch, m, kv, d)
    return inputs([qs, ks, ks, qs, qs, ks, ks], dtype, seed)


def wide(tensors):
    return [jnp.asarray(t, F64) for t in tensors]


def second_order(attn, q, k, v, do, uq, uk, uv, **options):
    """[O, dQ, dK, dV, gQ, gK, gV, gdO]: the backward by jax.vjp, then its own vjp at the
    cotangents u (reverse over reverse: BoB)."""
    def first(q, k, v, do):
        o, pullback = jax.vjp(lambda q, k, v: attn(q, k, v, **options), q, k, v)
        return o, pullback(do)
    (o, grads), pullback = jax.vjp(first, q, k, v, do)
    second = pullback((jnp.zeros_like(o), (uq, uk, uv)))
    return [o, *grads, *second]


NAMES = ["O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO"]


def check_all(got, ref, tol, label=""):
    errors = {name: rel(a, b) for name, a, b in zip(NAMES, got, ref)}
    print(label, {name: f"{e:.2e}" for name, e in errors.items()})
    for (name, err), a, b in zip(errors.items(), got, ref):
        assert a.shape == b.shape, name
        assert math.isfinite(err) and err <= tol, f"{name}: {err:.2e}"


def loss_of(attn, w, square=False, **options):
    """sum(O * w), dO = w (bf16 values, exact in either dtype); or sum(O^2 * w), whose dO depends
    on O (the square in w's dtype, float32 or float64)."""
    def loss(q, k, v):
        o = attn(q, k, v, **options).astype(w.dtype)
        return jnp.sum((o * o if square else o) * w)
    return loss


def hvps(attn, q, k, v, w, t, square=False, **options):
    """The HVP in q along t, forward over reverse and reverse over reverse."""
    loss = loss_of(attn, w, square, **options)
    grad = jax.grad(loss)
    forward = jax.jvp(lambda q: grad(q, k, v), (q,), (t,))[1]
    reverse = jax.grad(lambda q: jnp.vdot(grad(q, k, v).astype(w.dtype), t.astype(w.dtype)))(q)
    return forward, reverse


# --- jax only: validation ---------------------------------------------------------------------

def test_validation_names_the_argument():
    """The same messages as flashbob.torch (and the C API, for the head_dim), raised while
    tracing: no GPU needed."""
    q = jnp.zeros((1, 64, 1, 64), jnp.bfloat16)
    with pytest.raises(TypeError, match="q must be bfloat16 or float16, got float32"):
        fbj.attention(q.astype(jnp.float32), q, q)
    with pytest.raises(TypeError, match="v must be a jax array"):
        fbj.attention(q, q, [[0.0]])
    with pytest.raises(ValueError, match=r"q must be \(batch, seq, heads, head_dim\)"):
        fbj.attention(q[0], q, q)
    with pytest.raises(ValueError, match="k and v must agree in all but head_dim"):
        fbj.attention(q, q, q[:, :32])
    with pytest.raises(ValueError, match=r"head_dim 4 is unsupported \(8 to 256\)"):
        x = jnp.zeros((1, 64, 1, 4), jnp.bfloat16)
        fbj.attention(x, x, x)
    with pytest.raises(ValueError, match="scale must be positive"):
        fbj.attention(q, q, q, scale=-1.0)
    q4 = jnp.zeros((1, 64, 4, 64), jnp.bfloat16)
    k3 = jnp.zeros((1, 64, 3, 64), jnp.bfloat16)
    with pytest.raises(ValueError, match=r"k's heads \(3\) must divide q's \(4\)"):
        fbj.attention(q4, k3, k3)
    with pytest.raises(ValueError, match="differ in batch or head_dim"):
        fbj.attention(q4, jnp.concatenate([k3, k3]), jnp.concatenate([k3, k3]))
    with pytest.raises(TypeError, match="q, k, v must share a dtype"):
        fbj.attention(q, q.astype(jnp.float16), q.astype(jnp.float16))
    with pytest.raises(ValueError, match="window_size must be a pair"):
        fbj.attention(q, q, q, window_size=16)
    with pytest.raises(ValueError, match=r"window_size's left side must be an int >= -1"):
        fbj.attention(q, q, q, window_size=(-2, 0))
    with pytest.raises(ValueError, match=r"window_size's right side \(65\) is larger than the seq"):
        fbj.attention(q, q, q, window_size=(4, 65))
    with pytest.raises(ValueError, match=r"batch \* heads = 1 \* 70000 exceeds"):
        x = jax.ShapeDtypeStruct((1, 16, 70000, 64), jnp.bfloat16)
        jax.eval_shape(fbj.attention, x, x, x)


def test_varlen_validation_names_the_argument():
    q = jnp.zeros((64, 2, 64), jnp.bfloat16)
    cu = jnp.array([0, 30, 64], jnp.int32)
    call = fbj.attention_varlen
    with pytest.raises(ValueError, match=r"q must be \(total, heads, head_dim\)"):
        call(q[None], q, q, cu, cu, 34, 34)
    with pytest.raises(TypeError, match="k must be bfloat16 or float16"):
        call(q, q.astype(jnp.float32), q.astype(jnp.float32), cu, cu, 34, 34)
    with pytest.raises(ValueError, match="differ in head_dim"):
        x = jnp.zeros((64, 2, 32), jnp.bfloat16)
        call(q, x, x, cu, cu, 34, 34)
    with pytest.raises(TypeError, match="cu_seqlens_q must be int32"):
        call(q, q, q, cu.astype(jnp.int64), cu, 34, 34)
    with pytest.raises(TypeError, match="cu_seqlens_k must be a jax array"):
        call(q, q, q, cu, [0, 30, 64], 34, 34)
    with pytest.raises(ValueError, match="cu_seqlens_k must be 1-D"):
        call(q, q, q, cu, cu[None], 34, 34)
    with pytest.raises(ValueError, match="cu_seqlens_q and cu_seqlens_k must have the same length"):
        call(q, q, q, cu, jnp.array([0, 30, 30, 64], jnp.int32), 34, 34)
    with pytest.raises(ValueError, match=r"batch \+ 1 >= 2 offsets"):
        call(q, q, q, cu[:1], cu[:1], 34, 34)
    with pytest.raises(TypeError, match="max_seqlen_q must be an int"):
        call(q, q, q, cu, cu, 34.0, 34)
    with pytest.raises(TypeError, match="max_seqlen_k must be an int"):
        call(q, q, q, cu, cu, 34, jnp.array(34))
    with pytest.raises(ValueError, match="max_seqlen_q must be positive"):
        call(q, q, q, cu, cu, 0, 34)
    with pytest.raises(ValueError, match=r"window_size's left side \(65\) is larger"):
        call(q, q, q, cu, cu, 34, 34, window_size=(65, 0))
    with pytest.raises(ValueError, match="q holds no rows"):
        call(q[:0], q, q, jnp.array([0, 0], jnp.int32), jnp.array([0, 64], jnp.int32), 1, 34)


def test_shapes_and_primitives_without_running():
    """eval_shape gives every output's shape and dtype, and the jaxprs show which kernels each
    derivative runs: the gradient the backward, both HVP idioms BoB."""
    q = jax.ShapeDtypeStruct((2, 96, 4, 64), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((2, 160, 2, 64), jnp.bfloat16)
    o, lse = jax.eval_shape(lambda q, k, v: fbj.attention(q, k, v, return_lse=True), q, k, k)
    assert (o.shape, o.dtype, lse.shape, lse.dtype) == (q.shape, q.dtype, (2, 4, 96), jnp.float32)

    grad = jax.grad(loss_of(fbj.attention, jnp.zeros(q.shape, jnp.float32), causal=True),
                    argnums=(0, 1, 2))
    zq, zk = jnp.zeros(q.shape, q.dtype), jnp.zeros(k.shape, k.dtype)

    def kernels(f, *args):
        return {str(e.primitive) for e in _equations(jax.make_jaxpr(f)(*args).jaxpr)
                if str(e.primitive).startswith("flashbob_")}

    assert kernels(grad, zq, zk, zk) == {"flashbob_forward", "flashbob_backward"}
    def forward_over_reverse(q):
        return jax.jvp(lambda q: grad(q, zk, zk)[0], (q,), (zq,))[1]
    assert "flashbob_backward_jvp" in kernels(forward_over_reverse, zq)
    reverse_over_reverse = jax.grad(lambda q: jnp.vdot(grad(q, zk, zk)[0], zq).astype(jnp.float32))
    assert "flashbob_bob" in kernels(reverse_over_reverse, zq)
    assert "flashbob_forward_jvp" in kernels(lambda q: jax.jvp(
        lambda q: fbj.attention(q, zk, zk), (q,), (zq,))[1], zq)


def _equations(jaxpr):
    """Every equation, inside the bodies of jit, remat and the like too."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            inner = param.jaxpr if hasattr(param, "jaxpr") else param  # ClosedJaxpr or Jaxpr
            if hasattr(inner, "eqns"):
                yield from _equations(inner)


def test_third_derivatives_are_refused_while_tracing():
    """BoB has no derivative (third order), nor has the forward's JVP in q, k, v (forward over
    forward, reverse over forward): a clear NotImplementedError, not a wrong number."""
    q = jnp.zeros((1, 64, 1, 64), jnp.bfloat16)
    loss = lambda q: jnp.sum(fbj.attention(q, q, q).astype(jnp.float32) ** 2)  # noqa: E731
    hvp = lambda q: jax.jvp(jax.grad(loss), (q,), (q,))[1]  # noqa: E731
    with pytest.raises(NotImplementedError, match="not supported"):
        jax.make_jaxpr(jax.grad(lambda q: jnp.sum(hvp(q).astype(jnp.float32))))(q)
    rr = jax.grad(lambda q: jnp.vdot(jax.grad(loss)(q), q).astype(jnp.float32))
    with pytest.raises(NotImplementedError, match="third derivatives"):
        jax.make_jaxpr(jax.grad(lambda q: jnp.sum(rr(q).astype(jnp.float32))))(q)
    tangent = lambda q: jax.jvp(lambda q: fbj.attention(q, q, q), (q,), (q,))[1]  # noqa: E731
    with pytest.raises(NotImplementedError, match="forward over forward"):
        jax.make_jaxpr(lambda q: jax.jvp(tangent, (q,), (q,))[1])(q)


def test_off_cuda_the_error_names_the_device():
    """On a CPU device the lowering says so (a process of its own: the rule tests below lower
    the primitives on CPU with the reference math)."""
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, flashbob.jax as fbj
        q = jax.device_put(jnp.zeros((1, 64, 1, 64), jnp.bfloat16), jax.devices("cpu")[0])
        try:
            fbj.attention(q, q, q)
        except ValueError as e:
            print("ERROR", e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert "ERROR q, k, v must be on a CUDA device, got platform cpu" in out.stdout, out.stderr


def test_ffi_shim_mirrors_the_c_header(tmp_path):
    """jax_ffi.cc's copy of the C ABI against api/flashbob.h, field by field (its
    FLASHBOB_JAX_FFI_CHECK_HEADER static_asserts), and against flashbob._capi's structs."""
    if not (REPO / "api" / "flashbob.h").is_file():
        pytest.skip("not a source checkout: api/flashbob.h is missing")
    try:
        command = _ffi._compile_command()
    except _capi.FlashBobError as e:
        pytest.skip(str(e))
    check = [c for c in command if c != "-ldl"]
    check[check.index("-shared")] = "-fsyntax-only"
    out = subprocess.run([*check, "-DFLASHBOB_JAX_FFI_CHECK_HEADER", f"-I{REPO}"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]


def test_prebuilt_handlers_follow_jaxlibs_ffi_abi(tmp_path):
    """api/XlaFfiAbi.h, the XLA FFI C ABI as libflashbob.so's handlers read it, against the
    installed jaxlib's xla/ffi/api/c_api.h: every field at XLA's offset and size, every constant
    at XLA's value (test/python/xla_ffi_abi_check.cc's static_asserts)."""
    if not (REPO / "api" / "XlaFfiAbi.h").is_file():
        pytest.skip("not a source checkout: api/XlaFfiAbi.h is missing")
    version = _ffi.installed_ffi_version()
    if not _ffi.prebuilt_follows(version):
        pytest.skip(f"jaxlib's XLA FFI C API is {version}: flashbob.jax uses the shim there")
    try:
        compiler = _ffi._compiler()
    except _capi.FlashBobError as e:
        pytest.skip(str(e))
    out = subprocess.run([*compiler, "-std=c++17", "-fsyntax-only", "-I" + jax.ffi.include_dir(),
                          f"-I{REPO}", str(REPO / "test" / "python" / "xla_ffi_abi_check.cc")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]


# --- jax only: the differentiation rules, with the primitives lowered to the reference ---------
# Every custom call is replaced, on CPU, by the reference math (jax_ffi.cc's contract: O and L,
# J t, J^T dO, BoB's (H u, J u)), so the JVP, transpose and batching rules are checked against
# jax's own autodiff of the reference, on any machine. float16, so its rounding stays far below
# the error a wrong rule would make.

def _reference_primitive(kind):
    def math_of(*operands, causal, window_left, window_right, scale, packed, max_seqlen_q,
                max_seqlen_k):
        n = {"forward": 3, "forward_jvp": 8, "backward": 6, "bob": 9}[kind]
        tensors, offsets = operands[:n], operands[n:]
        dtype = tensors[0].dtype
        wide32 = [t.astype(jnp.float32) for t in tensors]
        options = dict(causal=causal, window_size=(window_left, window_right),
                       scale=scale or None, **dict(zip(("cu_seqlens_q", "cu_seqlens_k"), offsets)))
        attn = lambda q, k, v: reference_attention(q, k, v, **options)  # noqa: E731
        back = lambda q, k, v, do: jax.vjp(attn, q, k, v)[1](do)  # noqa: E731
        if kind == "forward":
            o, lse = reference_attention(*wide32, return_lse=True, **options)
            return [o.astype(dtype), lse.astype(jnp.float32)]
        if kind == "forward_jvp":
            q, k, v, _, _, tq, tk, tv = wide32
            return [jax.jvp(attn, (q, k, v), (tq, tk, tv))[1].astype(dtype)]
        q, k, v, _, _, do = wide32[:6]
        if kind == "backward":
            return [g.astype(dtype) for g in back(q, k, v, do)]
        return [g.astype(dtype) for g in jax.vjp(back, q, k, v, do)[1](tuple(wide32[6:9]))]
    return math_of


@pytest.fixture(scope="module")
def _registered_on_cpu():
    for prim, kind in ((_primitives.forward_p, "forward"),
                       (_primitives.forward_jvp_p, "forward_jvp"),
                       (_primitives.backward_p, "backward"), (_primitives.bob_p, "bob")):
        mlir.register_lowering(prim, mlir.lower_fun(_reference_primitive(kind),
                                                    multiple_results=True), platform="cpu")
    mlir.register_lowering(_primitives.backward_jvp_p,
                           mlir.lower_fun(_primitives.backward_jvp_eval, multiple_results=True),
                           platform="cpu")


@pytest.fixture
def reference_lowerings(_registered_on_cpu):
    """The test runs on CPU with the primitives lowered to the reference math (the GPU tests
    keep their CUDA lowerings and device)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


RULE_CASES = [  # (heads, heads_kv, N, M, d, causal, window)
    (2, 2, 48, 48, 16, False, (-1, -1)),
    (4, 2, 40, 56, 32, True, (-1, -1)),
    (2, 1, 56, 40, 16, False, (8, 4)),
]


@pytest.mark.parametrize("h,h_kv,n,m,d,causal,window", RULE_CASES)
def test_rules_second_order_against_jax_autodiff(reference_lowerings, h, h_kv, n, m, d, causal,
                                                 window):
    t = problem(h, n, m, d, jnp.float16, seed=n + m, h_kv=h_kv)
    options = dict(causal=causal, window_size=window)
    got = second_order(fbj.attention, *t, **options)
    ref = second_order(reference_attention, *wide(t), **options)
    check_all(got, ref, 1e-3, "rules")
    jitted = jax.jit(lambda *t: second_order(fbj.attention, *t, **options))(*t)
    check_all(jitted, ref, 1e-3, "rules, jit")


def value_width_problem(h, h_kv, n, m, d, dv, dtype, seed):
    """q k v dO uQ uK uV with v (and dO, uV) dv wide, q and k d wide."""
    qs, ks, vs, os = (1, n, h, d), (1, m, h_kv, d), (1, m, h_kv, dv), (1, n, h, dv)
    return inputs([qs, ks, vs, os, qs, ks, vs], dtype, seed)


def test_rules_v_of_another_head_dim_against_jax_autodiff(reference_lowerings):
    """The primitives' shapes and rules with v 48 wide, q and k 32 (O, dO, dV, gV, gdO at
    v's width), on the reference lowerings: second order, jit, and the forward-mode JVP."""
    t = value_width_problem(4, 2, 40, 56, 32, 48, jnp.float16, seed=7)
    got = second_order(fbj.attention, *t, causal=True)
    ref = second_order(reference_attention, *wide(t), causal=True)
    check_all(got, ref, 1e-3, "rules, d 32, dv 48")
    q, k, v, _, tq, tk, _ = t
    tv = inputs([v.shape], jnp.float16, seed=8)[0]
    to = jax.jvp(lambda q, k, v: fbj.attention(q, k, v, causal=True), (q, k, v), (tq, tk, tv))[1]
    to64 = jax.jvp(lambda q, k, v: reference_attention(q, k, v, causal=True), tuple(wide((q, k, v))),
                   tuple(wide((tq, tk, tv))))[1]
    assert to.shape == to64.shape == (1, 40, 4, 48)
    assert rel(to, to64) <= 1e-3


def test_rules_hvp_both_idioms_against_jax_autodiff(reference_lowerings):
    q, k, v, w, tq, _, _ = problem(2, 40, 56, 32, jnp.float16, seed=3, h_kv=1)
    got = hvps(fbj.attention, q, k, v, w.astype(jnp.float32), tq, causal=True)
    ref = hvps(reference_attention, *wide((q, k, v, w, tq)), causal=True)
    for g, r in zip(got, ref):
        assert rel(g, r) <= 1e-3, rel(g, r)
    # dO depends on O: the backward's JVP adds J^T tdO (with_do), its transpose routes BoB's gdO.
    got = hvps(fbj.attention, q, k, v, w.astype(jnp.float32), tq, square=True)
    ref = hvps(reference_attention, *wide((q, k, v, w, tq)), square=True)
    for g, r in zip(got, ref):
        assert rel(g, r) <= 1e-3, rel(g, r)


def test_rules_vmap_against_jax_autodiff(reference_lowerings):
    """vmap over a leading axis, k and v unmapped, and vmap of a per-example HVP."""
    q, k, v, w, tq, _, _ = problem(2, 32, 48, 16, jnp.float16, seed=5, batch=3)
    qs, ws, ts = q[:, None], w[:, None].astype(jnp.float32), tq[:, None]  # 3 slices of batch 1
    k1, v1 = k[:1], v[:1]  # shared by the slices
    k64, v64 = wide((k1, v1))
    mapped = jax.vmap(lambda q: fbj.attention(q, k1, v1))(qs)
    assert rel(mapped, jax.vmap(lambda q: reference_attention(q, k64, v64))(wide([qs])[0])) <= 1e-3
    got = jax.vmap(lambda q, w, t: hvps(fbj.attention, q, k1, v1, w, t)[0])(qs, ws, ts)
    ref = jax.vmap(lambda q, w, t: hvps(reference_attention, q, k64, v64, w, t)[0])(
        *wide((qs, ws, ts)))
    assert rel(got, ref) <= 1e-3


def test_rules_varlen_against_jax_autodiff(reference_lowerings):
    lens_q, lens_k = [20, 0, 36], [30, 12, 20]
    t = inputs([(56, 4, 16), (62, 2, 16), (62, 2, 16), (56, 4, 16), (56, 4, 16), (62, 2, 16),
                (62, 2, 16)], jnp.float16, seed=7)
    cu_q = jnp.array(np.cumsum([0, *lens_q]), jnp.int32)
    cu_k = jnp.array(np.cumsum([0, *lens_k]), jnp.int32)
    got = second_order(lambda q, k, v, **o: fbj.attention_varlen(q, k, v, cu_q, cu_k, 36, 30, **o),
                       *t, causal=True)
    ref = second_order(lambda q, k, v, **o: reference_attention(q, k, v, cu_seqlens_q=cu_q,
                                                                cu_seqlens_k=cu_k, **o),
                       *wide(t), causal=True)
    check_all(got, ref, 1e-3, "rules, varlen")
    # vmap folds the mapped axis into the heads; offsets cannot be mapped.
    qs = jnp.stack([t[0], t[3]])
    mapped = jax.vmap(lambda q: fbj.attention_varlen(q, t[1], t[2], cu_q, cu_k, 36, 30))(qs)
    q64, k64, v64 = wide((qs, t[1], t[2]))
    for i in range(2):
        assert rel(mapped[i], reference_attention(q64[i], k64, v64, cu_seqlens_q=cu_q,
                                                  cu_seqlens_k=cu_k)) <= 1e-3
    with pytest.raises(ValueError, match="vmap over cu_seqlens_q or cu_seqlens_k"):
        jax.vmap(lambda cu: fbj.attention_varlen(t[0], t[1], t[2], cu, cu_k, 36, 30))(
            jnp.stack([cu_q, cu_q]))


# --- the kernels (a CUDA device and libflashbob.so) ---------------------------------------------

CASES = [  # (heads, N, M, d, causal)
    (2, 128, 128, 64, False),
    (2, 96, 160, 64, True),    # causal with N < M
    (2, 200, 136, 128, True),  # causal with N > M: the first rows see no key
    (1, 256, 256, 128, False),
]


@gpu
@pytest.mark.parametrize("d,dv", [(192, 128), (64, 128)])
def test_v_of_another_head_dim_than_q_and_k(d, dv):
    """v dv wide, q and k d wide (multi-head latent attention's 192 and 128): every output and
    second derivative against float64 with grouped heads and a causal mask, N != M."""
    t = value_width_problem(4, 2, 150, 190, d, dv, jnp.bfloat16, seed=d + dv)
    got = second_order(fbj.attention, *t, causal=True)
    ref = second_order(reference_attention, *wide(t), causal=True)
    check_all(got, ref, TOL[jnp.bfloat16], f"d {d} dv {dv}")


@gpu
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("h,n,m,d,causal", CASES)
def test_first_and_second_derivatives(dtype, h, n, m, d, causal):
    t = problem(h, n, m, d, dtype, seed=n + m + d)
    got = second_order(fbj.attention, *t, causal=causal)
    ref = second_order(reference_attention, *wide(t), causal=causal)
    check_all(got, ref, TOL[dtype], f"{dtype.__name__} {h} {n} {m} {d} {causal}")


@gpu
def test_forward_and_lse():
    """O, and L = logsumexp(scale q k^T) per row: -inf where a row sees no key, and a constant to
    differentiation (stop_gradient, as flashbob.torch's L is not differentiable)."""
    q, k, v, *_ = problem(4, 160, 96, 64, jnp.bfloat16, seed=41, h_kv=2)
    for causal in (False, True):
        o, lse = fbj.attention(q, k, v, causal=causal, scale=0.3, return_lse=True)
        ref_o, ref_lse = reference_attention(*wide((q, k, v)), causal=causal, scale=0.3,
                                             return_lse=True)
        assert lse.shape == (1, 4, 160) and lse.dtype == jnp.float32
        assert rel(o, ref_o) <= TOL[jnp.bfloat16]
        seen = np.isfinite(np.asarray(ref_lse))
        assert np.array_equal(np.isfinite(np.asarray(lse)), seen)
        assert np.abs(np.asarray(lse, np.float64)[seen] - np.asarray(ref_lse)[seen]).max() <= 1e-4
        assert bool(jnp.all(fbj.attention(q, k, v, causal=causal, scale=0.3) == o))
    assert not jnp.any(jax.grad(lambda q: fbj.attention(q, k, v, return_lse=True)[1].sum())(q))


GQA_CASES = [  # (heads, heads_kv, N, M, d, causal)
    (6, 2, 96, 160, 64, True),     # groups of 3
    (4, 1, 200, 136, 128, False),  # multi-query
]


@gpu
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("h,h_kv,n,m,d,causal", GQA_CASES)
def test_grouped_query_attention(dtype, h, h_kv, n, m, d, causal):
    """dK, dV, gK, gV come back in k's shape (summed over each group), bit-identical run to run."""
    t = problem(h, n, m, d, dtype, seed=h + n + m + d, h_kv=h_kv)
    got = second_order(fbj.attention, *t, causal=causal)
    check_all(got, second_order(reference_attention, *wide(t), causal=causal), TOL[dtype], "gqa")
    again = second_order(fbj.attention, *t, causal=causal)
    for name, a, b in zip(NAMES, got, again):
        assert bool(jnp.all(a == b)), name


WINDOW_CASES = [  # (heads, heads_kv, N, M, d, causal, window_size)
    (2, 2, 200, 200, 64, False, (32, 16)),  # two-sided
    (2, 1, 300, 200, 128, True, (50, -1)),  # causal with a left window, N > M, multi-query
    (4, 2, 130, 333, 64, False, (-1, 20)),  # right side only, N < M
    (2, 2, 200, 100, 64, False, (10, 5)),   # rows 0-94 see no key at all
]


@gpu
@pytest.mark.parametrize("h,h_kv,n,m,d,causal,window", WINDOW_CASES)
def test_sliding_window(h, h_kv, n, m, d, causal, window):
    t = problem(h, n, m, d, jnp.bfloat16, seed=h + n + m + d + window[0], h_kv=h_kv)
    options = dict(causal=causal, window_size=window)
    check_all(second_order(fbj.attention, *t, **options),
              second_order(reference_attention, *wide(t), **options), TOL[jnp.bfloat16], window)


@gpu
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_hvp_forward_over_reverse_and_reverse_over_reverse(dtype):
    """jax.jvp(jax.grad) and jax.grad(jax.grad) against the float64 reference's HVP and each other,
    with dO independent of O (loss linear in O) and dependent on it (loss quadratic)."""
    q, k, v, w, tq, _, _ = problem(2, 128, 192, 64, dtype, seed=3)
    for square in (False, True):
        forward, reverse = hvps(fbj.attention, q, k, v, w.astype(jnp.float32), tq, square,
                                causal=True)
        ref, _ = hvps(reference_attention, *wide((q, k, v, w, tq)), square, causal=True)
        assert rel(forward, ref) <= TOL[dtype], (square, rel(forward, ref))
        assert rel(reverse, ref) <= TOL[dtype], (square, rel(reverse, ref))


@gpu
def test_jit_matches_eager_and_is_deterministic():
    t = problem(2, 96, 128, 64, jnp.bfloat16, seed=12)
    step = lambda *t: second_order(fbj.attention, *t, causal=True)  # noqa: E731
    eager, jitted, again = step(*t), jax.jit(step)(*t), jax.jit(step)(*t)
    for name, a, b, c in zip(NAMES, eager, jitted, again):
        assert bool(jnp.all(b == c)), name
        assert rel(a, b) <= 1e-6, name  # the same kernels on the same values


@gpu
def test_vmap_over_a_leading_axis():
    """vmap folds the mapped axis into the batch (k, v mapped or not); vmap of grad gives each
    slice's own gradient."""
    q, k, v, w, _, _, _ = problem(2, 96, 128, 64, jnp.bfloat16, seed=13, batch=2)
    stacked = [jnp.stack([x, jnp.flip(x, 1)]) for x in (q, k, v)]
    mapped = jax.vmap(fbj.attention)(*stacked)
    for i in range(2):
        assert bool(jnp.all(mapped[i] == fbj.attention(*(s[i] for s in stacked))))
    shared = jax.vmap(lambda q: fbj.attention(q, k, v, causal=True))(stacked[0])
    assert bool(jnp.all(shared[1] == fbj.attention(stacked[0][1], k, v, causal=True)))
    loss = loss_of(fbj.attention, w.astype(jnp.float32), causal=True)
    per_slice = jax.vmap(jax.grad(loss))(*stacked)
    assert rel(per_slice[1], jax.grad(loss)(*(s[1] for s in stacked))) <= 1e-6


@gpu
def test_donated_buffers():
    """Donated q, k, v (their buffers reusable for the outputs) change nothing."""
    q, k, v, w, _, _, _ = problem(2, 128, 128, 64, jnp.bfloat16, seed=14)
    loss = loss_of(fbj.attention, w.astype(jnp.float32), causal=True)
    expected = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
    step = jax.jit(jax.grad(loss, argnums=(0, 1, 2)), donate_argnums=(0, 1, 2))
    got = step(*(jnp.array(x, copy=True) for x in (q, k, v)))
    for a, b in zip(got, expected):
        assert bool(jnp.all(a == b))


@gpu
def test_third_derivative_is_refused():
    q, k, v, w, tq, _, _ = problem(1, 64, 64, 64, jnp.bfloat16, seed=9)
    loss = loss_of(fbj.attention, w.astype(jnp.float32))
    hvp = lambda q: jax.jvp(lambda q: jax.grad(loss)(q, k, v), (q,), (tq,))[1]  # noqa: E731
    with pytest.raises(NotImplementedError, match="not supported"):
        jax.grad(lambda q: jnp.sum(hvp(q).astype(jnp.float32)))(q)
    rr = lambda q: jax.grad(lambda q: jnp.vdot(jax.grad(loss)(q, k, v), tq).astype(  # noqa: E731
        jnp.float32))(q)
    with pytest.raises(NotImplementedError, match="third derivatives"):
        jax.grad(lambda q: jnp.sum(rr(q).astype(jnp.float32)))(q)


def _block_loss(attn, dtype, heads=4):
    """A pre-norm-free transformer block (attention and an MLP, each residual), mean square out;
    the attention's q, k, v and output in `dtype`, the rest in the parameters' dtype."""
    def loss(params, x):
        wq, wk, wv, wo, w1, w2 = params
        b, n, width = x.shape
        split = lambda t: t.reshape(b, n, heads, width // heads).astype(dtype)  # noqa: E731
        o = attn(split(x @ wq), split(x @ wk), split(x @ wv), causal=True)
        h = x + o.astype(x.dtype).reshape(b, n, width) @ wo
        h = h + jax.nn.gelu(h @ w1) @ w2
        return jnp.mean(h ** 2)
    return loss


@gpu
def test_transformer_block_hvp():
    """Forward over reverse through a block, in its parameters: flashbob.jax (fp16 attention,
    whose rounding is small next to a wrong term) against the float64 block and attention."""
    width, hidden = 256, 512
    keys = jax.random.split(jax.random.PRNGKey(17), 14)
    shapes = [(width, width)] * 4 + [(width, hidden), (hidden, width)]
    params = [jax.random.normal(key, s, jnp.float32) * s[0] ** -0.5
              for key, s in zip(keys, shapes)]
    tangent = [jax.random.normal(key, s, jnp.float32) for key, s in zip(keys[6:], shapes)]
    x = jax.random.normal(keys[12], (2, 128, width), jnp.float32)

    def hvp(loss, params, tangent, x):
        return jax.jvp(lambda p: jax.grad(loss)(p, x), (params,), (tangent,))[1]
    got = hvp(_block_loss(fbj.attention, jnp.float16), params, tangent, x)
    ref = hvp(_block_loss(reference_attention, F64), wide(params), wide(tangent), wide([x])[0])
    err = rel(jnp.concatenate([g.ravel() for g in got]), jnp.concatenate([r.ravel() for r in ref]))
    assert err <= 1e-2, err


@gpu
def test_maml_outer_gradient():
    """One inner SGD step on the projections (jax.grad), the outer gradient through it (jax.grad
    again): reverse over reverse through attention, as python/examples/meta_learning.py does in
    torch; bf16 projections and adapted weights, so the torch test's 2e-2."""
    keys = jax.random.split(jax.random.PRNGKey(5), 7)
    b, n, h, d = 1, 256, 2, 64
    x_train, y_train, x_val, y_val = (jax.random.normal(key, (b, n, h, d)).astype(jnp.bfloat16)
                                      for key in keys[:4])
    weights = [(jax.random.normal(key, (d, d)) * d ** -0.5).astype(jnp.bfloat16)
               for key in keys[4:]]

    def outer_gradient(attn, weights, x_train, y_train, x_val, y_val, lr=0.1):
        def loss(w, x, y):
            o = attn(x @ w[0], x @ w[1], x @ w[2], causal=True)
            return jnp.mean((o.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)

        def outer(w):
            grads = jax.grad(loss)(w, x_train, y_train)
            adapted = [wi - lr * gi for wi, gi in zip(w, grads)]
            return loss(adapted, x_val, y_val)
        return jax.grad(outer)(weights)
    got = outer_gradient(fbj.attention, weights, x_train, y_train, x_val, y_val)
    ref = outer_gradient(reference_attention, wide(weights),
                         *wide((x_train, y_train, x_val, y_val)))
    for g, r in zip(got, ref):
        assert rel(g, r) <= 2e-2, rel(g, r)


VARLEN_CASES = [  # (heads, heads_kv, query lengths, key lengths, d, causal, window_size)
    (2, 2, [37, 0, 128, 5], [64, 17, 128, 0], 64, False, (-1, -1)),  # an empty, a keyless one
    (4, 2, [100, 1, 0, 77, 130], [130, 1, 40, 20, 130], 64, True, (-1, -1)),
    (6, 2, [200, 64, 33], [150, 64, 90], 128, False, (24, 8)),
]


@gpu
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("h,h_kv,lens_q,lens_k,d,causal,window", VARLEN_CASES)
def test_varlen_first_and_second_derivatives(dtype, h, h_kv, lens_q, lens_k, d, causal, window):
    tq, tk = sum(lens_q), sum(lens_k)
    qs, ks = (tq, h, d), (tk, h_kv, d)
    t = inputs([qs, ks, ks, qs, qs, ks, ks], dtype, seed=h + d + tq + tk)
    cu_q = jnp.array(np.cumsum([0, *lens_q]), jnp.int32)
    cu_k = jnp.array(np.cumsum([0, *lens_k]), jnp.int32)
    longest = (max(lens_q), max(lens_k))
    options = dict(causal=causal, window_size=window)
    got = second_order(lambda q, k, v, **o: fbj.attention_varlen(q, k, v, cu_q, cu_k, *longest,
                                                                 **o), *t, **options)
    ref = second_order(lambda q, k, v, **o: reference_attention(q, k, v, cu_seqlens_q=cu_q,
                                                                cu_seqlens_k=cu_k, **o),
                       *wide(t), **options)
    check_all(got, ref, TOL[dtype], f"varlen {lens_q} {lens_k}")


@gpu
def test_varlen_offsets_are_checked_when_the_kernels_run():
    """The offsets' contents are the C API's to check (it reads them back): its message reaches
    the caller in XLA's runtime error."""
    q = jnp.zeros((64, 2, 64), jnp.bfloat16)
    bad = jnp.array([0, 40, 30, 64], jnp.int32)
    good = jnp.array([0, 20, 40, 64], jnp.int32)
    with pytest.raises(jax.errors.JaxRuntimeError, match="cu_seqlens_q must not decrease"):
        jax.block_until_ready(fbj.attention_varlen(q, q, q, bad, good, 64, 64))


_SUM_SCRIPT = textwrap.dedent("""
    import logging, jax, jax.numpy as jnp, flashbob.jax as fbj
    from flashbob.jax import _ffi
    logging.basicConfig(level=logging.INFO, format="LOG %(message)s")
    q = jnp.ones((1, 64, 1, 64), jnp.bfloat16)
    print("SUM", float(fbj.attention(q, q, q).astype(jnp.float32).sum()))
    print("GRAD", float(jax.grad(lambda q: fbj.attention(q, q, q).astype(jnp.float32).sum())(q)
                        .astype(jnp.float32).sum()))
    print("HANDLERS", _ffi.registered())
""")


@gpu
def test_prebuilt_handlers_run_without_a_compiler(tmp_path):
    """Where jaxlib's FFI API is one libflashbob.so's handlers follow, flashbob.jax registers
    them: no compiler on PATH (PATH stripped to the interpreter's directory, no CXX), nothing
    written under the cache's jax-ffi/; the same sums as the shim's (below): all ones, so O is
    all ones, the scores' gradients vanish and v's gradient is P^T 1, ones again."""
    if not _ffi.prebuilt_follows(_ffi.installed_ffi_version()):
        pytest.skip("jaxlib's XLA FFI C API is not one the prebuilt handlers follow")
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "FLASHBOB_JAX_FFI")}
    env.update(PATH=str(Path(sys.executable).parent), FLASHBOB_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _SUM_SCRIPT], capture_output=True, text=True,
                         timeout=600, env=env)
    assert "SUM 4096.0" in run.stdout and "GRAD 4096.0" in run.stdout, run.stderr[-4000:]
    assert "HANDLERS prebuilt" in run.stdout, run.stdout
    assert not (tmp_path / "jax-ffi").exists()


@gpu
def test_ffi_shim_is_built_once_into_the_cache_directory(tmp_path):
    """With FLASHBOB_JAX_FFI=shim (as where jaxlib's FFI API is not the prebuilt handlers'):
    FLASHBOB_CACHE_DIR/jax-ffi holds the shim; a second process loads it without compiling."""
    script = _SUM_SCRIPT
    env = dict(os.environ, FLASHBOB_CACHE_DIR=str(tmp_path), FLASHBOB_JAX_FFI="shim")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=600, env=env) for _ in range(2)]
    for run in runs:
        assert "SUM 4096.0" in run.stdout and "GRAD 4096.0" in run.stdout, run.stderr[-4000:]
        assert "HANDLERS shim" in run.stdout, run.stdout
    shims = list((tmp_path / "jax-ffi").glob("flashbob_jax_ffi-*.so"))
    assert len(shims) == 1 and not (shims[0].stat().st_mode & 0o022)
    compiled = ["compiling the XLA FFI shim" in run.stderr for run in runs]
    assert compiled == [True, False], [run.stderr[-2000:] for run in runs]


def test_import_without_jax_says_what_is_needed(tmp_path):
    fake = tmp_path / "jax"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no jaxlib here')\n")
    path = os.pathsep.join([str(tmp_path), str(Path(flashbob.__file__).resolve().parents[1])])
    out = subprocess.run([sys.executable, "-c", "import flashbob.jax"], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHONPATH=path))
    assert "flashbob.jax needs jax and jaxlib with CUDA support" in out.stderr, out.stderr


def test_no_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-flashbob")
    with pytest.raises(_capi.FlashBobError, match="needs a C\\+\\+17 compiler"):
        _ffi._compiler()
    if shutil.which("c++") or shutil.which("g++") or shutil.which("clang++"):
        monkeypatch.delenv("CXX")
        assert _ffi._compiler()
