"""The primitives' lowering: on CUDA, an XLA FFI custom call each (the handlers of _ffi),
except backward_jvp, which lowers to the others; on any other platform, an error naming it.
"""

import math

import jax
import numpy as np
from jax.interpreters import mlir

from . import _ffi
from ._primitives import (PRIMITIVES, backward_jvp_eval, backward_jvp_p, backward_p, bob_p,
                          forward_jvp_p, forward_p, rows_shape)


# --- lowering: XLA FFI custom calls ------------------------------------------------------------
# (target, handler symbol in jax_ffi.cc, in libflashbob.so, row-vector workspaces the C call
# needs). A workspace is one more result of the custom call that the primitive does not return:
# XLA allocates it with the outputs and frees it after the call.

_TARGETS = {
    forward_p: ("flashbob_forward", "FlashBobJaxForward", "flashbob_xla_forward", 0),
    forward_jvp_p: ("flashbob_forward_jvp", "FlashBobJaxForwardJvp", "flashbob_xla_forward_jvp",
                    0),
    backward_p: ("flashbob_backward", "FlashBobJaxBackward", "flashbob_xla_backward", 1),  # D
    bob_p: ("flashbob_bob", "FlashBobJaxBob", "flashbob_xla_bob", 3),  # D, c, b
}
_HANDLERS = [handler[:3] for handler in _TARGETS.values()]


def _ffi_attributes(params):
    """The handlers' attributes, typed as they decode them (i64, f64)."""
    return dict(causal=np.int64(params["causal"]), window_left=np.int64(params["window_left"]),
                window_right=np.int64(params["window_right"]), scale=np.float64(params["scale"]),
                max_seqlen_q=np.int64(params["max_seqlen_q"]),
                max_seqlen_k=np.int64(params["max_seqlen_k"]))


def _custom_call_lowering(target, workspaces):
    def lowering(ctx, *operands, **params):
        _ffi.register_targets(_HANDLERS)
        results = len(ctx.avals_out)
        if workspaces:
            rows = math.prod(rows_shape(ctx.avals_in[0].shape, params["packed"]))
            workspace = jax.core.ShapedArray((workspaces * rows,), np.float32)
            ctx = ctx.replace(avals_out=[*ctx.avals_out, workspace])
        out = jax.ffi.ffi_lowering(target)(ctx, *operands, **_ffi_attributes(params))
        return list(out)[:results]
    return lowering


def _not_on_cuda(ctx, *operands, **params):
    platforms = ", ".join(ctx.module_context.platforms)
    raise ValueError(f"q, k, v must be on a CUDA device, got platform {platforms}: flashbob.jax's "
                     f"kernels run on NVIDIA GPUs only")


for _prim, (_target, _symbol, _prebuilt, _workspaces) in _TARGETS.items():
    mlir.register_lowering(_prim, _custom_call_lowering(_target, _workspaces), platform="cuda")
mlir.register_lowering(backward_jvp_p, mlir.lower_fun(backward_jvp_eval, multiple_results=True),
                       platform="cuda")
for _prim in PRIMITIVES:
    mlir.register_lowering(_prim, _not_on_cuda)  # every other platform
