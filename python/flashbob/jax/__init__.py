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

Five primitives, each an XLA FFI custom call on XLA's CUDA stream (the handlers built into
libflashbob.so, or the jax_ffi.cc shim: _ffi) except the backward's JVP, which is two of them:

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

The modules: the user API here; the primitives, their parameters, operand checks and shapes in
_primitives; their JVP, transpose and vmap rules in _rules; their lowering (the custom calls) in
_lowering; which FFI handlers run, their registration and the shim's build and cache in _ffi.

Importing needs jax but no GPU; the FFI handlers are registered (the shim compiled where it is
needed) when a call is first lowered for CUDA, and libflashbob.so is loaded then
(flashbob._capi's search).
"""

import numpy as np

try:
    import jax
    # Not used here: imported so that a jax without them fails here, with the message below.
    import jax.numpy as jnp  # noqa: F401
    from jax.extend.core import Primitive  # noqa: F401
    from jax.interpreters import ad, batching, mlir  # noqa: F401
except ImportError as e:  # jaxlib missing, or a jax too old for jax.extend / jax.ffi
    raise ImportError("flashbob.jax needs jax and jaxlib with CUDA support (e.g. pip install "
                      f"'jax[cuda12]'): {e}") from e

from .. import _checks
from .._capi import FlashBobError  # noqa: F401 (what the calls raise, importable from here)
from . import _lowering, _rules  # noqa: F401 (they register the primitives' rules and lowerings)
from ._primitives import (check_operands as _check_operands, forward_p as _forward_p,
                          parameters as _parameters)

__all__ = ["attention", "attention_varlen"]


# --- the user's entry points: the checks only they need (the primitives' own: _primitives) -----

def _check_offsets(cu_seqlens_q, cu_seqlens_k):
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k")):
        if not (hasattr(t, "shape") and hasattr(t, "dtype")):
            raise TypeError(f"{name} must be a jax array of int32 offsets, got {type(t).__name__}")
    _checks.offsets(cu_seqlens_q, cu_seqlens_k, lambda dtype: np.dtype(dtype) == np.int32)


def _is_array(value):
    """JAX and NumPy arrays and scalars (tracers too): never a static bound."""
    return hasattr(value, "shape")


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
    o, lse = _forward_p.bind(q, k, v, **_parameters(causal, window, scale))
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
                             **_parameters(causal, window, scale, packed=True, max_seqlen=longest))
    return (o, jax.lax.stop_gradient(lse)) if return_lse else o
