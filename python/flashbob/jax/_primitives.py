"""The five primitives (the package's docstring, docs/jax.md): the parameters they take, the
operands they accept (checked at trace time, in their abstract evaluation), the shapes of their
results, and how an eager call runs one. backward_jvp is the one made of the others
(backward_jvp_eval, which the lowering runs).

The differentiation and vmap rules are in _rules, the lowering to XLA FFI custom calls in
_lowering.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive

from .. import _capi, _checks

DTYPES = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16))


# --- validation: the checks flashbob.torch shares (flashbob._checks), the library's limits -----
# Shapes are JAX's: heads and head_dim are the last two axes in both layouts, seq the third last.

def _dtype_ok(dtype):
    return np.dtype(dtype) in DTYPES


def check_operands(q, k, v, packed):
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
                      q.shape[seq + 2], _capi.BF16 if np.dtype(q.dtype) == DTYPES[0] else _capi.FP16,
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


def parameters(causal, window, scale, packed=False, max_seqlen=(0, 0)):
    """The parameters every primitive takes (jax_ffi.cc's attributes, plus `packed`)."""
    return dict(causal=bool(causal), window_left=window[0], window_right=window[1], scale=scale,
                packed=packed, max_seqlen_q=max_seqlen[0], max_seqlen_k=max_seqlen[1])


# --- the primitives ----------------------------------------------------------------------------
# Operands are tensors, then (packed only) cu_seqlens_q and cu_seqlens_k. A tensor's role says its
# shape: "q" like q, "k" like k, "v" like v (their gradients too), "o" like O (q's shape at v's
# head_dim: dO and its gradient too), "L" a row vector (lse), float32 (batch, heads, seq_q), or
# (heads, total_q) for a packed batch.

def rows_shape(q_shape, packed):
    return (q_shape[1], q_shape[0]) if packed else (q_shape[0], q_shape[2], q_shape[1])


ROLES = {}  # primitive -> (its tensor operands' roles given its parameters, its results')


def _primitive(name, inputs, outputs):
    prim = Primitive(name)
    prim.multiple_results = len(outputs) > 1
    ROLES[prim] = (inputs if callable(inputs) else lambda params: inputs), outputs
    return prim


def _backward_jvp_inputs(params):
    return "qkvoLo" + "qkv" + ("o" if params["with_do"] else "")


forward_p = _primitive("flashbob_forward", "qkv", "oL")
forward_jvp_p = _primitive("flashbob_forward_jvp", "qkvoLqkv", "o")
backward_p = _primitive("flashbob_backward", "qkvoLo", "qkv")
backward_jvp_p = _primitive("flashbob_backward_jvp", _backward_jvp_inputs, "qkv")
bob_p = _primitive("flashbob_bob", "qkvoLoqkv", "qkvo")
PRIMITIVES = (forward_p, forward_jvp_p, backward_p, backward_jvp_p, bob_p)


def split(prim, args, params):
    """(tensor operands, offsets)."""
    count = len(ROLES[prim][0](params))
    return args[:count], args[count:]


def _abstract_eval(prim):
    def rule(*avals, **params):
        tensors, offsets = split(prim, avals, params)
        q, k, v = tensors[:3]
        packed = params["packed"]
        check_operands(q, k, v, packed)
        if len(offsets) != (2 if packed else 0):
            raise ValueError(f"flashbob.jax: {prim.name} takes cu_seqlens_q and cu_seqlens_k "
                             f"exactly when packed")
        _check_problem(q, k, v, offsets, packed, params)
        like = {"q": (q.shape, q.dtype), "k": (k.shape, k.dtype), "v": (v.shape, v.dtype),
                "o": ((*q.shape[:-1], v.shape[-1]), q.dtype),
                "L": (rows_shape(q.shape, packed), np.dtype(np.float32))}
        for i, (role, aval) in enumerate(zip(ROLES[prim][0](params), tensors)):
            if (aval.shape, np.dtype(aval.dtype)) != like[role]:
                raise ValueError(f"flashbob.jax: operand {i} of {prim.name} is "
                                 f"{aval.str_short()}, expected {like[role]}")
        outs = [jax.core.ShapedArray(*like[role]) for role in ROLES[prim][1]]
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


for _prim in PRIMITIVES:
    _prim.def_abstract_eval(_abstract_eval(_prim))
    _prim.def_impl(_impl(_prim))


# --- backward_jvp, made of the others ----------------------------------------------------------

def add(xs, ys):
    """Elementwise sums of two gradients, added in float32 as flashbob.torch does."""
    return [(x.astype(jnp.float32) + y.astype(jnp.float32)).astype(x.dtype)
            for x, y in zip(xs, ys)]


def backward_jvp_eval(q, k, v, o, lse, do, *rest, with_do, **config):
    """The backward's JVP as it runs (forward over reverse): H t is BoB's (gQ, gK, gV) at u = t;
    J^T tdO is the backward at dO = tdO."""
    t, tdo, offsets = rest[:3], rest[3:3 + with_do], rest[3 + with_do:]
    hessian = bob_p.bind(q, k, v, o, lse, do, *t, *offsets, **config)[:3]
    if not with_do:
        return hessian
    return add(hessian, backward_p.bind(q, k, v, o, lse, *tdo, *offsets, **config))
