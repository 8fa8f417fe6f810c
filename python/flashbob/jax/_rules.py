"""The primitives' differentiation and vmap rules (docs/jax.md, "Which derivative runs which
kernel"): the JVP of each, the transpose of each linear one, and a batching rule that folds the
mapped axis into the kernels' batch (a packed batch's: its heads).
"""

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching

from ._primitives import (PRIMITIVES, ROLES, add, backward_jvp_p, backward_p, bob_p, forward_jvp_p,
                          forward_p, parameters, split)


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
    return {name: params[name] for name in parameters(False, (-1, -1), 0.0)}


def _forward_jvp_rule(primals, tangents, **params):
    q, k, v, *offsets = primals
    o, lse = forward_p.bind(*primals, **params)
    to = forward_jvp_p.bind(q, k, v, o, lse, *_instantiate(tangents[:3]), *offsets, **params)
    # L's tangent is left out: L reaches the caller only through stop_gradient, and the backward
    # and BoB, which take it, derive its change from q, k, v themselves (see the backward's rule).
    return (o, lse), (to, _zero_like(lse))


def _backward_jvp_rule(primals, tangents, **params):
    q, k, v, o, lse, do, *offsets = primals
    grads = backward_p.bind(*primals, **params)
    # The backward in direction (t, tdO) (t on q, k, v) is H t + J^T tdO. O and L are functions
    # of q, k, v whose change H t already holds (docs/bob-math.md): their tangents add nothing, as
    # in flashbob.torch's _BackwardFn.jvp (flashbob/torch/_autograd.py).
    t, tdo = tangents[:3], tangents[5]
    if all(_is_zero(x) for x in t):
        if _is_zero(tdo):
            return grads, [_zero_like(g) for g in grads]
        return grads, backward_p.bind(q, k, v, o, lse, tdo, *offsets, **params)
    with_do = not _is_zero(tdo)
    linear = [*_instantiate(t), *([tdo] if with_do else [])]
    tangent = backward_jvp_p.bind(q, k, v, o, lse, do, *linear, *offsets, with_do=with_do,
                                  **params)
    return grads, tangent


def _linear_jvp_rule(prim, fixed, error):
    """JVP of a primitive linear in its operands after the first `fixed` (up to the offsets)."""
    def rule(primals, tangents, **params):
        tensors, offsets = split(prim, primals, params)
        if any(not _is_zero(t) for t in tangents[:fixed]):
            raise NotImplementedError(error)
        out = prim.bind(*primals, **params)
        linear = _instantiate(tangents[fixed:len(tensors)])
        return out, prim.bind(*tensors[:fixed], *linear, *offsets, **params)
    return rule


ad.primitive_jvps[forward_p] = _forward_jvp_rule
ad.primitive_jvps[backward_p] = _backward_jvp_rule
ad.primitive_jvps[forward_jvp_p] = _linear_jvp_rule(forward_jvp_p, 5, _FORWARD_TWICE)
ad.primitive_jvps[backward_jvp_p] = _linear_jvp_rule(backward_jvp_p, 6, _THIRD)
ad.primitive_jvps[bob_p] = _linear_jvp_rule(bob_p, 6, _THIRD)


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


def _forward_jvp_transpose(ct, *args, **params):
    # tO = J t, so t's cotangent is J^T ct: the backward at dO = ct.
    (q, k, v, o, lse, *t), offsets = split(forward_jvp_p, args, params)
    _require_known(forward_jvp_p, (q, k, v, o, lse))
    if _is_zero(ct):
        return [None] * len(args)
    grads = backward_p.bind(q, k, v, o, lse, *_cotangents([ct], [q]), *offsets, **params)
    return [None] * 5 + _for_linear(t, grads) + [None] * len(offsets)


def _backward_transpose(cts, *args, **params):
    # Linear in dO with J^T: dO's cotangent is J cts, the forward's JVP at the cotangents.
    (q, k, v, o, lse, do), offsets = split(backward_p, args, params)
    _require_known(backward_p, (q, k, v, o, lse))
    if all(_is_zero(ct) for ct in cts):
        return [None] * len(args)
    tdo = forward_jvp_p.bind(q, k, v, o, lse, *_cotangents(cts, (q, k, v)), *offsets, **params)
    return [None] * 5 + _for_linear([do], [tdo]) + [None] * len(offsets)


def _backward_jvp_transpose(cts, *args, **params):
    # (t, tdO) -> H t + J^T tdO transposes to w -> (H w, J w): BoB's (gQ, gK, gV) and gdO.
    tensors, offsets = split(backward_jvp_p, args, params)
    residuals, linear = tensors[:6], tensors[6:]
    _require_known(backward_jvp_p, residuals)
    if all(_is_zero(ct) for ct in cts):
        return [None] * len(args)
    config = _config_of(params)
    grads = bob_p.bind(*residuals, *_cotangents(cts, residuals[:3]), *offsets, **config)
    return [None] * 6 + _for_linear(linear, grads) + [None] * len(offsets)


def _bob_transpose(cts, *args, **params):
    # u -> (H u, J u) transposes to (w, w_dO) -> H w + J^T w_dO: BoB's (gQ, gK, gV) at w plus the
    # backward at w_dO (H is symmetric).
    tensors, offsets = split(bob_p, args, params)
    residuals, u = tensors[:6], tensors[6:]
    _require_known(bob_p, residuals)
    w, w_do = cts[:3], cts[3]
    parts = []
    if not all(_is_zero(ct) for ct in w):
        parts.append(bob_p.bind(*residuals, *_cotangents(w, residuals[:3]), *offsets,
                                **params)[:3])
    if not _is_zero(w_do):
        parts.append(backward_p.bind(*residuals[:5], *_cotangents([w_do], residuals[:1]),
                                     *offsets, **params))
    if not parts:
        return [None] * len(args)
    grads = parts[0] if len(parts) == 1 else add(*parts)
    return [None] * 6 + _for_linear(u, grads) + [None] * len(offsets)


ad.primitive_transposes[forward_jvp_p] = _forward_jvp_transpose
ad.primitive_transposes[backward_p] = _backward_transpose
ad.primitive_transposes[backward_jvp_p] = _backward_jvp_transpose
ad.primitive_transposes[bob_p] = _bob_transpose


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
        inputs, outputs = ROLES[prim][0](params), ROLES[prim][1]
        tensors, offsets = split(prim, args, params)
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


for _prim in PRIMITIVES:
    batching.primitive_batchers[_prim] = _batch_rule(_prim)
