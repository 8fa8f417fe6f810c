"""`attention(q, k, v, causal=False, scale=None, window_size=(-1, -1))` for JAX, differentiable
twice, and `attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, ...)`
for packed batches of variable-length sequences (docs/jax.md).

    import jax, jax.numpy as jnp, flashbob.jax as fbj
    q, k, v = (jax.random.normal(key, (1, 4096, 8, 64), jnp.bfloat16) for key in keys)
    loss = lambda q: (fbj.attention(q, k, v, causal=True).astype(jnp.float32) ** 2).sum()
    hvp = jax.jvp(jax.grad(loss), (q,), (t,))[1]                  # runs BoB
    hvp = jax.grad(lambda q: jnp.vdot(jax.grad(loss)(q), t))(q)    # BoB too

Tensors are laid out as JAX's own attention takes them, (batch, seq, heads, head_dim), which the
C API reads in place as (batch, heads, seq, head_dim) with strides {seq * heads * d, d, heads * d,
1}: no transposes, no copies.

Five primitives, each an XLA FFI custom call on XLA's CUDA stream (jax_ffi.cc) except the
backward's JVP, which is two of them:

    forward      (q, k, v)                    -> (O, L)          flashbob_forward
    forward_jvp  (q, k, v, O, L; tq, tk, tv)  -> tO              flashbob_forward_jvp
    backward     (q, k, v, O, L, dO)          -> (dq, dk, dv)    flashbob_backward
    backward_jvp (q, k, v, O, L, dO; t, [tdO]) -> H t + J^T tdO   flashbob_bob (+ backward)
    bob          (q, k, v, O, L, dO; u)       -> (H u, J u)      flashbob_bob

with J the forward's Jacobian in (q, k, v) and H the Hessian of <dO, O> in (q, k, v) (symmetric;
docs/bob-math.md). Each is linear in the operands after the ';' (and backward in dO), and its
transpose is another of them: forward_jvp^T = backward, backward^T (in dO) = forward_jvp,
backward_jvp^T = bob (one BoB gives both H v and J v), bob^T = bob's H w + backward(w_dO). So
jax.grad is forward, forward_jvp transposed (the backward); jax.grad(jax.grad) and
jax.jvp(jax.grad) differentiate the backward, whose JVP is backward_jvp: reverse over reverse runs
one BoB, forward over reverse BoB and, where dO has a tangent, a backward. As in
flashbob.torch, O and L enter the backward and BoB as inputs whose tangents are ignored: they are
functions of q, k, v, and BoB's formulas already carry their change.

Importing needs jax but no GPU; the FFI shim is compiled and registered when a call is first
lowered for CUDA, and libflashbob.so is loaded then (flashbob._capi's search).
"""

import ctypes
import functools
import hashlib
import math
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

try:
    import jax
    import jax.numpy as jnp
    from jax.extend.core import Primitive
    from jax.interpreters import ad, batching, mlir
except ImportError as e:  # jaxlib missing, or a jax too old for jax.extend / jax.ffi
    raise ImportError("flashbob.jax needs jax and jaxlib with CUDA support (e.g. pip install "
                      f"'jax[cuda12]'): {e}") from e

from . import _capi, _checks
from ._capi import FlashBobError

__all__ = ["attention", "attention_varlen"]

_DTYPES = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16))


# --- validation: the checks flashbob.torch shares (flashbob._checks), the library's limits -----
# Shapes are JAX's: heads and head_dim are the last two axes in both layouts, seq the third last.

def _dtype_ok(dtype):
    return np.dtype(dtype) in _DTYPES


def _check_operands(q, k, v, packed):
    layout = _checks.PACKED if packed else _checks.JAX
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not (hasattr(t, "shape") and hasattr(t, "dtype")):
            raise TypeError(f"{name} must be a jax array, got {type(t).__name__}")
        _checks.tensor(t, name, layout, _dtype_ok)
    _checks.operands(q, k, v, layout)


def _check_problem(q, k, v, offsets, packed, params):
    """The C API's checks of the problem (flashbob_check_problem: head dims, grid and sequence
    bounds, the window), at trace time: at run time they would surface as an XLA runtime error
    instead of a ValueError."""
    _capi.check_problem(_problem(q, k, v, offsets, packed, params))


def _problem(q, k, v, offsets, packed, params):
    """The C problem (flashbob_problem) of a primitive's operands, as jax_ffi.cc fills it but for
    the offsets' addresses, which the checks do not read."""
    seq = 0 if packed else 1  # the sequence axis; heads and head_dim follow it
    p = _capi.Problem(0 if packed else q.shape[0], q.shape[seq + 1], q.shape[seq], k.shape[seq],
                      q.shape[seq + 2], _capi.BF16 if np.dtype(q.dtype) == _DTYPES[0] else _capi.FP16,
                      int(params["causal"]), params["scale"], k.shape[seq + 1],
                      int(params["window_left"] >= 0 or params["window_right"] >= 0),
                      params["window_left"], params["window_right"])
    if v.shape[-1] != q.shape[-1]:
        p.head_dim_v = v.shape[-1]
    if packed:
        p.batch = offsets[0].shape[0] - 1
        p.varlen = 1
        p.max_seqlen_q, p.max_seqlen_k = params["max_seqlen_q"], params["max_seqlen_k"]
    return p


def _check_offsets(cu_seqlens_q, cu_seqlens_k):
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k")):
        if not (hasattr(t, "shape") and hasattr(t, "dtype")):
            raise TypeError(f"{name} must be a jax array of int32 offsets, got {type(t).__name__}")
    _checks.offsets(cu_seqlens_q, cu_seqlens_k, lambda dtype: np.dtype(dtype) == np.int32)


def _is_array(value):
    """JAX and NumPy arrays and scalars (tracers too): never a static bound."""
    return hasattr(value, "shape")


# --- the user's entry points -------------------------------------------------------------------

def _config(causal, window, scale, packed=False, max_seqlen=(0, 0)):
    """The parameters every primitive takes (jax_ffi.cc's attributes, plus `packed`)."""
    return dict(causal=bool(causal), window_left=window[0], window_right=window[1], scale=scale,
                packed=packed, max_seqlen_q=max_seqlen[0], max_seqlen_k=max_seqlen[1])


def attention(q, k, v, causal=False, scale=None, return_lse=False, window_size=(-1, -1)):
    """softmax(scale * q k^T) v with a causal mask if asked (bottom-right aligned when the
    sequence lengths differ); scale defaults to 1/sqrt(head_dim). Differentiable twice: its
    backward is differentiable in both modes and runs BoB.

    q: (batch, seq_q, heads, head_dim); k, v: (batch, seq_k, heads_kv, head_dim), bfloat16 or
    float16, heads_kv a divisor of heads (grouped-query attention, 1 for multi-query): query head
    h attends with key/value head h // (heads // heads_kv), and the gradients of k and v sum over
    each group inside the kernels. head_dim: 8 to 256 (one that is no multiple of 16 runs
    zero-padded to the next multiple, exactly; one that is no multiple of 8 is copied into
    padded memory inside the call). v's head_dim may differ from q's and k's (multi-head latent
    attention: 192 and 128): O then has v's, the scale stays 1/sqrt(q's), and the call runs on
    zero-padded copies at the wider width.

    window_size: (left, right), flash-attn's sliding window: query i sees key j only if
    i + seq_k - seq_q - left <= j <= i + seq_k - seq_q + right; -1 leaves a side unbounded, and
    causal=True makes right 0. causal, scale and window_size are static (Python values).

    return_lse: also return L, the natural log-sum-exp of each query row of scale * q k^T,
    (batch, heads, seq_q) float32, -inf for a row that sees no key. It is returned through
    jax.lax.stop_gradient: a constant to differentiation, as flashbob.torch's L is not
    differentiable."""
    scale = _checks.scale(scale)
    _check_operands(q, k, v, packed=False)
    window = _checks.window_fits(window_size, q.shape[1], k.shape[1])
    o, lse = _forward_p.bind(q, k, v, **_config(causal, window, scale))
    return (o, jax.lax.stop_gradient(lse)) if return_lse else o


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, scale=None, return_lse=False, window_size=(-1, -1)):
    """attention() over a packed batch of variable-length sequences, flash-attn's
    flash_attn_varlen_func: sequence s has the query rows cu_seqlens_q[s] .. cu_seqlens_q[s + 1]
    - 1 and the key rows cu_seqlens_k[s] .. cu_seqlens_k[s + 1] - 1, and attends only to itself.
    Differentiable twice, as attention().

    q: (total_q, heads, head_dim); k, v: (total_k, heads_kv, head_dim). cu_seqlens_q,
    cu_seqlens_k: int32 arrays of batch + 1 offsets (0, the running sums of the lengths, the
    total), which the C API reads back and checks when the kernels run (an error there is an XLA
    runtime error naming them). max_seqlen_q, max_seqlen_k: static ints, at least the longest
    sequence's rows (a larger bound is clamped to the total). causal and window_size hold within
    each sequence, bottom-right aligned in its own rows.

    Returns o (total_q, heads, head_dim), and with return_lse also L (heads, total_q) float32
    (through jax.lax.stop_gradient)."""
    scale = _checks.scale(scale)
    _check_operands(q, k, v, packed=True)
    _check_offsets(cu_seqlens_q, cu_seqlens_k)
    _checks.packed_rows(q, k)
    longest = (_checks.longest(max_seqlen_q, "max_seqlen_q", q.shape[0], _is_array),
               _checks.longest(max_seqlen_k, "max_seqlen_k", k.shape[0], _is_array))
    window = _checks.window_fits(window_size, *longest, ("max_seqlen_q", "max_seqlen_k"))
    o, lse = _forward_p.bind(q, k, v, cu_seqlens_q, cu_seqlens_k,
                             **_config(causal, window, scale, packed=True, max_seqlen=longest))
    return (o, jax.lax.stop_gradient(lse)) if return_lse else o


# --- the primitives ----------------------------------------------------------------------------
# Operands are tensors, then (packed only) cu_seqlens_q and cu_seqlens_k. A tensor's role says its
# shape: "q" like q, "k" like k, "v" like v (their gradients too), "o" like O (q's shape at v's
# head_dim: dO and its gradient too), "L" a row vector (lse), float32 (batch, heads, seq_q), or
# (heads, total_q) for a packed batch.

def _rows_shape(q_shape, packed):
    return (q_shape[1], q_shape[0]) if packed else (q_shape[0], q_shape[2], q_shape[1])


_ROLES = {}  # primitive -> (its tensor operands' roles given its parameters, its results')


def _primitive(name, inputs, outputs):
    prim = Primitive(name)
    prim.multiple_results = len(outputs) > 1
    _ROLES[prim] = (inputs if callable(inputs) else lambda params: inputs), outputs
    return prim


def _backward_jvp_inputs(params):
    return "qkvoLo" + "qkv" + ("o" if params["with_do"] else "")


_forward_p = _primitive("flashbob_forward", "qkv", "oL")
_forward_jvp_p = _primitive("flashbob_forward_jvp", "qkvoLqkv", "o")
_backward_p = _primitive("flashbob_backward", "qkvoLo", "qkv")
_backward_jvp_p = _primitive("flashbob_backward_jvp", _backward_jvp_inputs, "qkv")
_bob_p = _primitive("flashbob_bob", "qkvoLoqkv", "qkvo")
_PRIMITIVES = (_forward_p, _forward_jvp_p, _backward_p, _backward_jvp_p, _bob_p)


def _split(prim, args, params):
    """(tensor operands, offsets)."""
    count = len(_ROLES[prim][0](params))
    return args[:count], args[count:]


def _abstract_eval(prim):
    def rule(*avals, **params):
        tensors, offsets = _split(prim, avals, params)
        q, k, v = tensors[:3]
        packed = params["packed"]
        _check_operands(q, k, v, packed)
        if len(offsets) != (2 if packed else 0):
            raise ValueError(f"flashbob.jax: {prim.name} takes cu_seqlens_q and cu_seqlens_k "
                             f"exactly when packed")
        _check_problem(q, k, v, offsets, packed, params)
        like = {"q": (q.shape, q.dtype), "k": (k.shape, k.dtype), "v": (v.shape, v.dtype),
                "o": ((*q.shape[:-1], v.shape[-1]), q.dtype),
                "L": (_rows_shape(q.shape, packed), np.dtype(np.float32))}
        for i, (role, aval) in enumerate(zip(_ROLES[prim][0](params), tensors)):
            if (aval.shape, np.dtype(aval.dtype)) != like[role]:
                raise ValueError(f"flashbob.jax: operand {i} of {prim.name} is "
                                 f"{aval.str_short()}, expected {like[role]}")
        outs = [jax.core.ShapedArray(*like[role]) for role in _ROLES[prim][1]]
        return outs if prim.multiple_results else outs[0]
    return rule


@functools.lru_cache(maxsize=None)
def _compiled(prim, params):
    return jax.jit(lambda *args: prim.bind(*args, **dict(params)))


def _impl(prim):
    """Eager calls run the primitive alone under jit (its lowering is the only implementation);
    jit stays on under jax.disable_jit, where it would otherwise recurse into this impl."""
    def impl(*args, **params):
        with jax.disable_jit(False):
            return _compiled(prim, tuple(sorted(params.items())))(*args)
    return impl


for _prim in _PRIMITIVES:
    _prim.def_abstract_eval(_abstract_eval(_prim))
    _prim.def_impl(_impl(_prim))


# --- differentiation ---------------------------------------------------------------------------
# JVP rules: the forward's and the backward's are the chain; the others are linear in their last
# operands (before the offsets) and have no derivative in the rest, which would be a derivative
# the kernels do not compute.

_THIRD = ("flashbob.jax: third derivatives of attention are not supported (BoB, the backward's "
          "derivative, has no derivative of its own)")
_FORWARD_TWICE = ("flashbob.jax: differentiating attention's forward-mode derivative is not "
                  "supported (forward over forward, reverse over forward, or a third derivative "
                  "built on jax.jvp): second derivatives through the gradient, "
                  "jax.grad(jax.grad(f)) or jax.jvp(jax.grad(f), ...), run BoB")


def _is_zero(t):
    return type(t) is ad.Zero


def _instantiate(tangents):
    return [ad.instantiate_zeros(t) for t in tangents]


def _zero_like(x):
    return ad.Zero(jax.typeof(x).to_tangent_aval())


def _config_of(params):
    """The shared parameters (without a primitive's own, backward_jvp's with_do)."""
    return {name: params[name] for name in _config(False, (-1, -1), 0.0)}


def _forward_jvp_rule(primals, tangents, **params):
    q, k, v, *offsets = primals
    o, lse = _forward_p.bind(*primals, **params)
    to = _forward_jvp_p.bind(q, k, v, o, lse, *_instantiate(tangents[:3]), *offsets, **params)
    # L's tangent is left out: L reaches the caller only through stop_gradient, and the backward
    # and BoB, which take it, derive its change from q, k, v themselves (see the backward's rule).
    return (o, lse), (to, _zero_like(lse))


def _backward_jvp_rule(primals, tangents, **params):
    q, k, v, o, lse, do, *offsets = primals
    grads = _backward_p.bind(*primals, **params)
    # The backward in direction (t, tdO) (t on q, k, v) is H t + J^T tdO. O and L are functions
    # of q, k, v whose change H t already holds (docs/bob-math.md): their tangents add nothing, as
    # in flashbob.torch's _BackwardFn.jvp (flashbob/torch/_autograd.py).
    t, tdo = tangents[:3], tangents[5]
    if all(_is_zero(x) for x in t):
        if _is_zero(tdo):
            return grads, [_zero_like(g) for g in grads]
        return grads, _backward_p.bind(q, k, v, o, lse, tdo, *offsets, **params)
    with_do = not _is_zero(tdo)
    linear = [*_instantiate(t), *([tdo] if with_do else [])]
    tangent = _backward_jvp_p.bind(q, k, v, o, lse, do, *linear, *offsets, with_do=with_do,
                                   **params)
    return grads, tangent


def _linear_jvp_rule(prim, fixed, error):
    """JVP of a primitive linear in its operands after the first `fixed` (up to the offsets)."""
    def rule(primals, tangents, **params):
        tensors, offsets = _split(prim, primals, params)
        if any(not _is_zero(t) for t in tangents[:fixed]):
            raise NotImplementedError(error)
        out = prim.bind(*primals, **params)
        linear = _instantiate(tangents[fixed:len(tensors)])
        return out, prim.bind(*tensors[:fixed], *linear, *offsets, **params)
    return rule


ad.primitive_jvps[_forward_p] = _forward_jvp_rule
ad.primitive_jvps[_backward_p] = _backward_jvp_rule
ad.primitive_jvps[_forward_jvp_p] = _linear_jvp_rule(_forward_jvp_p, 5, _FORWARD_TWICE)
ad.primitive_jvps[_backward_jvp_p] = _linear_jvp_rule(_backward_jvp_p, 6, _THIRD)
ad.primitive_jvps[_bob_p] = _linear_jvp_rule(_bob_p, 6, _THIRD)


# Transpose rules: each linear operand gets its cotangent (None where it is not being transposed,
# or the cotangent is zero); the others must be known values.

def _require_known(prim, values):
    if any(ad.is_undefined_primal(x) for x in values):
        raise NotImplementedError(f"flashbob.jax: {prim.name} is linear only in its tangent "
                                  f"operands; it cannot be transposed in q, k, v, O, L or dO")


def _cotangents(cts, like):
    """Cotangents as the kernels take them: zeros instantiated, in the operands' dtype."""
    return [ad.instantiate_zeros(ct).astype(x.dtype) for ct, x in zip(cts, like)]


def _for_linear(linear, grads):
    return [g if ad.is_undefined_primal(x) else None for x, g in zip(linear, grads)]


def _add(xs, ys):
    """Elementwise sums of two gradients, added in float32 as torch.py does."""
    return [(x.astype(jnp.float32) + y.astype(jnp.float32)).astype(x.dtype)
            for x, y in zip(xs, ys)]


def _forward_jvp_transpose(ct, *args, **params):
    # tO = J t, so t's cotangent is J^T ct: the backward at dO = ct.
    (q, k, v, o, lse, *t), offsets = _split(_forward_jvp_p, args, params)
    _require_known(_forward_jvp_p, (q, k, v, o, lse))
    if _is_zero(ct):
        return [None] * len(args)
    grads = _backward_p.bind(q, k, v, o, lse, *_cotangents([ct], [q]), *offsets, **params)
    return [None] * 5 + _for_linear(t, grads) + [None] * len(offsets)


def _backward_transpose(cts, *args, **params):
    # Linear in dO with J^T: dO's cotangent is J cts, the forward's JVP at the cotangents.
    (q, k, v, o, lse, do), offsets = _split(_backward_p, args, params)
    _require_known(_backward_p, (q, k, v, o, lse))
    if all(_is_zero(ct) for ct in cts):
        return [None] * len(args)
    tdo = _forward_jvp_p.bind(q, k, v, o, lse, *_cotangents(cts, (q, k, v)), *offsets, **params)
    return [None] * 5 + _for_linear([do], [tdo]) + [None] * len(offsets)


def _backward_jvp_transpose(cts, *args, **params):
    # (t, tdO) -> H t + J^T tdO transposes to w -> (H w, J w): BoB's (gQ, gK, gV) and gdO.
    tensors, offsets = _split(_backward_jvp_p, args, params)
    residuals, linear = tensors[:6], tensors[6:]
    _require_known(_backward_jvp_p, residuals)
    if all(_is_zero(ct) for ct in cts):
        return [None] * len(args)
    config = _config_of(params)
    grads = _bob_p.bind(*residuals, *_cotangents(cts, residuals[:3]), *offsets, **config)
    return [None] * 6 + _for_linear(linear, grads) + [None] * len(offsets)


def _bob_transpose(cts, *args, **params):
    # u -> (H u, J u) transposes to (w, w_dO) -> H w + J^T w_dO: BoB's (gQ, gK, gV) at w plus the
    # backward at w_dO (H is symmetric).
    tensors, offsets = _split(_bob_p, args, params)
    residuals, u = tensors[:6], tensors[6:]
    _require_known(_bob_p, residuals)
    w, w_do = cts[:3], cts[3]
    parts = []
    if not all(_is_zero(ct) for ct in w):
        parts.append(_bob_p.bind(*residuals, *_cotangents(w, residuals[:3]), *offsets,
                                 **params)[:3])
    if not _is_zero(w_do):
        parts.append(_backward_p.bind(*residuals[:5], *_cotangents([w_do], residuals[:1]),
                                      *offsets, **params))
    if not parts:
        return [None] * len(args)
    grads = parts[0] if len(parts) == 1 else _add(*parts)
    return [None] * 6 + _for_linear(u, grads) + [None] * len(offsets)


ad.primitive_transposes[_forward_jvp_p] = _forward_jvp_transpose
ad.primitive_transposes[_backward_p] = _backward_transpose
ad.primitive_transposes[_backward_jvp_p] = _backward_jvp_transpose
ad.primitive_transposes[_bob_p] = _bob_transpose


# --- vmap: the mapped axis joins the batch (a packed batch's: the heads) -----------------------
# Dense tensors and row vectors lead with the batch, so (size, batch, ...) folds into
# (size * batch, ...) by a reshape, no copy. A packed batch's slices share its sequences, so
# they become more heads of the one batch, (total, size * heads, d) (a transpose), and a query
# head's key/value head stays in its slice (s * heads_kv + h // group), as in flashbob.torch.

_VMAP_OFFSETS = ("flashbob: vmap over cu_seqlens_q or cu_seqlens_k is not supported: the mapped "
                 "slices must share one packed batch's offsets (map over q, k, v only)")


def _leading(x, dim, size):
    if dim is None:  # unmapped: every slice reads the same values
        return jnp.broadcast_to(x, (size, *x.shape))
    return jnp.moveaxis(x, dim, 0)


def _fold(x, role, packed):
    if not packed:
        return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])
    if role == "L":  # (size, heads, total)
        return x.reshape(x.shape[0] * x.shape[1], x.shape[2])
    size, total, heads, head_dim = x.shape
    return jnp.swapaxes(x, 0, 1).reshape(total, size * heads, head_dim)


def _unfold(y, size, role, packed):
    if not packed:
        return y.reshape(size, y.shape[0] // size, *y.shape[1:])
    if role == "L":
        return y.reshape(size, y.shape[0] // size, y.shape[1])
    total, heads, head_dim = y.shape
    return jnp.swapaxes(y.reshape(total, size, heads // size, head_dim), 0, 1)


def _batch_rule(prim):
    def rule(args, dims, **params):
        inputs, outputs = _ROLES[prim][0](params), _ROLES[prim][1]
        tensors, offsets = _split(prim, args, params)
        if any(d is not None for d in dims[len(tensors):]):
            raise ValueError(_VMAP_OFFSETS)
        size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
        packed = params["packed"]
        folded = [_fold(_leading(x, d, size), role, packed)
                  for x, d, role in zip(tensors, dims, inputs)]
        out = prim.bind(*folded, *offsets, **params)
        if not prim.multiple_results:
            return _unfold(out, size, outputs[0], packed), 0
        return [_unfold(y, size, role, packed) for y, role in zip(out, outputs)], [0] * len(out)
    return rule


for _prim in _PRIMITIVES:
    batching.primitive_batchers[_prim] = _batch_rule(_prim)


# --- lowering: XLA FFI custom calls ------------------------------------------------------------
# (target, handler symbol in jax_ffi.cc, row-vector workspaces the C call needs). A workspace is
# one more result of the custom call that the primitive does not return: XLA allocates it with
# the outputs and frees it after the call.

_TARGETS = {
    _forward_p: ("flashbob_forward", "FlashBobJaxForward", 0),
    _forward_jvp_p: ("flashbob_forward_jvp", "FlashBobJaxForwardJvp", 0),
    _backward_p: ("flashbob_backward", "FlashBobJaxBackward", 1),  # D
    _bob_p: ("flashbob_bob", "FlashBobJaxBob", 3),  # D, c, b
}


def _ffi_attributes(params):
    """jax_ffi.cc's attributes, typed as it decodes them (i64, f64)."""
    return dict(causal=np.int64(params["causal"]), window_left=np.int64(params["window_left"]),
                window_right=np.int64(params["window_right"]), scale=np.float64(params["scale"]),
                max_seqlen_q=np.int64(params["max_seqlen_q"]),
                max_seqlen_k=np.int64(params["max_seqlen_k"]))


def _custom_call_lowering(target, workspaces):
    def lowering(ctx, *operands, **params):
        _register_targets()
        results = len(ctx.avals_out)
        if workspaces:
            rows = math.prod(_rows_shape(ctx.avals_in[0].shape, params["packed"]))
            workspace = jax.core.ShapedArray((workspaces * rows,), np.float32)
            ctx = ctx.replace(avals_out=[*ctx.avals_out, workspace])
        out = jax.ffi.ffi_lowering(target)(ctx, *operands, **_ffi_attributes(params))
        return list(out)[:results]
    return lowering


def _backward_jvp_eval(q, k, v, o, lse, do, *rest, with_do, **config):
    """The backward's JVP as it runs (forward over reverse): H t is BoB's (gQ, gK, gV) at u = t;
    J^T tdO is the backward at dO = tdO."""
    t, tdo, offsets = rest[:3], rest[3:3 + with_do], rest[3 + with_do:]
    hessian = _bob_p.bind(q, k, v, o, lse, do, *t, *offsets, **config)[:3]
    if not with_do:
        return hessian
    return _add(hessian, _backward_p.bind(q, k, v, o, lse, *tdo, *offsets, **config))


def _not_on_cuda(ctx, *operands, **params):
    platforms = ", ".join(ctx.module_context.platforms)
    raise ValueError(f"q, k, v must be on a CUDA device, got platform {platforms}: flashbob.jax's "
                     f"kernels run on NVIDIA GPUs only")


for _prim, (_target, _symbol, _workspaces) in _TARGETS.items():
    mlir.register_lowering(_prim, _custom_call_lowering(_target, _workspaces), platform="cuda")
mlir.register_lowering(_backward_jvp_p, mlir.lower_fun(_backward_jvp_eval, multiple_results=True),
                       platform="cuda")
for _prim in _PRIMITIVES:
    mlir.register_lowering(_prim, _not_on_cuda)  # every other platform


# --- the FFI shim: built once per source, jax and compiler, cached, registered on first use ----

_SOURCE = Path(__file__).with_name("jax_ffi.cc")
_shim = None
_shim_lock = threading.Lock()


def _register_targets():
    """Builds (or finds) the shim, points it at libflashbob.so and registers its handlers with
    XLA; once per process."""
    global _shim
    with _shim_lock:
        if _shim is not None:
            return
        shim = ctypes.CDLL(str(_shim_library()))
        init = shim.flashbob_jax_ffi_init
        init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        init.restype = ctypes.c_int
        message = ctypes.create_string_buffer(1024)
        # The path flashbob._capi loaded: dlopen returns that same handle (one kernel cache).
        library = os.path.abspath(_capi.library_path())
        if init(os.fsencode(library), message, len(message)) != 0:
            raise FlashBobError("flashbob.jax: " + message.value.decode(errors="replace"))
        for target, symbol, _ in _TARGETS.values():
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(shim, symbol)),
                                        platform="CUDA")
        _shim = shim


def _compiler():
    named = os.environ.get("CXX")
    command = shlex.split(named) if named else []
    for candidate in ([command[0]] if command else ["c++", "g++", "clang++"]):
        found = shutil.which(candidate)
        if found:
            return [found, *command[1:]]
    raise FlashBobError("flashbob.jax compiles its XLA FFI shim (jax_ffi.cc) on first use and "
                        "needs a C++17 compiler: " +
                        (f"CXX={named} is not found" if named else
                         "none of c++, g++, clang++ is on PATH") + " (install one or set CXX)")


def _compile_command():
    """The command without its output; every input that changes the binary is in it."""
    return [*_compiler(), "-std=c++17", "-O2", "-shared", "-fPIC", "-I" + jax.ffi.include_dir(),
            f"-DFLASHBOB_PROBLEM_SIZE={ctypes.sizeof(_capi.Problem)}",
            f"-DFLASHBOB_TENSOR_SIZE={ctypes.sizeof(_capi.Tensor)}", str(_SOURCE), "-ldl"]


def _shim_key(command):
    """The cache key: the source, the XLA FFI headers it includes, jax's version, the command."""
    digest = hashlib.sha256(_SOURCE.read_bytes())
    api = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api"
    for header in sorted(api.glob("*.h")):
        digest.update(header.read_bytes())
    digest.update("\0".join([jax.__version__, *command]).encode())
    return digest.hexdigest()[:16]


def _cache_root():
    """The kernel cache's directory as the library resolves it (flashbob_cache_dir;
    docs/cache-threat-model.md), whose jax-ffi/ holds shims."""
    return Path(_capi.cache_dir())


def _owned(path, kind):
    """Whether `path` is this user's, of `kind` (stat.S_ISDIR / S_ISREG), and writable by no one
    else: a shim is code this process runs."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return kind(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _shim_directory():
    directory = _cache_root() / "jax-ffi"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass
    if _owned(directory, stat.S_ISDIR):
        return directory
    private = Path(tempfile.mkdtemp(prefix="flashbob-jax-ffi-"))
    _capi.logger.warning("flashbob.jax: %s is not a directory only this user can write; building "
                         "the FFI shim in %s for this process", directory, private)
    return private


def _shim_library():
    """The shim's path, compiled first if no cached build matches (atomically: a temporary file
    renamed into place, so concurrent processes never load a partial one)."""
    if not _SOURCE.is_file():
        raise FlashBobError(f"flashbob.jax: {_SOURCE} is missing (the flashbob package must ship "
                            f"jax_ffi.cc, docs/jax.md)")
    command = _compile_command()
    directory = _shim_directory()
    target = directory / f"flashbob_jax_ffi-{_shim_key(command)}.so"
    if _owned(target, stat.S_ISREG):
        return target
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        _capi.logger.info("flashbob.jax: compiling the XLA FFI shim: %s", " ".join(command))
        done = subprocess.run([*command, "-o", temporary], capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).splitlines()[-30:])
            raise FlashBobError(f"flashbob.jax: compiling the XLA FFI shim failed (exit "
                                f"{done.returncode}): {' '.join(command)}\n{tail}")
        os.chmod(temporary, 0o700)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target
