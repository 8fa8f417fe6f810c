"""The kernels as torch operators (torch.library.custom_op): flashbob::forward, flashbob::backward,
flashbob::bob and flashbob::forward_jvp. Each has a fake implementation (shapes without running,
for torch.compile and FakeTensor), an autograd formula chained to the next (forward's is the
backward operator, whose own is BoB; BoB's raises: a third derivative is not implemented) and a
vmap rule, so that torch.compile, dispatch modes and vmap see ordinary operators.

Every operator ends in the same config (_launch.Config): (causal, window_left, window_right,
scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), passed on as it came and none of
it differentiable.
"""

from typing import Optional

import torch

from . import _launch
from ._launch import Config

CONFIG_ARGS = len(Config._fields)


def _plan(q, k, v, config):
    return _launch.plan(q, k, v, Config(*config))


def _forward_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  window_left: int, window_right: int, scale: float,
                  cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                  max_seqlen_q: int, max_seqlen_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    config = (causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k)
    return _launch.forward(_plan(q, k, v, config), q, k, v)


def _backward_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   lse: torch.Tensor, do: torch.Tensor, causal: bool,
                   window_left: int, window_right: int, scale: float,
                   cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                   max_seqlen_q: int,
                   max_seqlen_k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    config = (causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k)
    return _launch.backward(_plan(q, k, v, config), q, k, v, o, lse, do)


def _bob_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
              do: torch.Tensor, uq: torch.Tensor, uk: torch.Tensor, uv: torch.Tensor, causal: bool,
              window_left: int, window_right: int, scale: float,
              cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
              max_seqlen_q: int,
              max_seqlen_k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    config = (causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k)
    return _launch.bob(_plan(q, k, v, config), q, k, v, o, lse, do, uq, uk, uv)


def _forward_jvp_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                      lse: torch.Tensor, tq: torch.Tensor, tk: torch.Tensor, tv: torch.Tensor,
                      causal: bool, window_left: int, window_right: int, scale: float,
                      cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                      max_seqlen_q: int, max_seqlen_k: int) -> torch.Tensor:
    config = (causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k)
    return _launch.forward_jvp(_plan(q, k, v, config), q, k, v, o, lse, tq, tk, tv)


forward = torch.library.custom_op("flashbob::forward", mutates_args=(), device_types="cuda")(
    _forward_body)
backward = torch.library.custom_op("flashbob::backward", mutates_args=(), device_types="cuda")(
    _backward_body)
bob = torch.library.custom_op("flashbob::bob", mutates_args=(), device_types="cuda")(_bob_body)
forward_jvp = torch.library.custom_op("flashbob::forward_jvp", mutates_args=(),
                                      device_types="cuda")(_forward_jvp_body)


def _packed(config):
    return config[4] is not None


@forward.register_fake
def _(q, k, v, *config):
    return _launch.empty(q, _packed(config), v.shape[3]), _launch.rows(q)


@backward.register_fake
def _(q, k, v, o, lse, do, *config):
    packed = _packed(config)
    return _launch.empty(q, packed), _launch.empty(k, packed), _launch.empty(v, packed)


@bob.register_fake
def _(q, k, v, o, lse, do, uq, uk, uv, *config):
    packed = _packed(config)
    return tuple(_launch.empty(t, packed) for t in (q, k, v, do))


@forward_jvp.register_fake
def _(q, k, v, o, lse, tq, tk, tv, *config):
    return _launch.empty(o, _packed(config))


# --- autograd: forward -> backward -> BoB -------------------------------------------------------
# The config's offsets are saved as tensors (not kept on ctx), so that torch.func's transforms
# unwrap and rewrap them as they do the other saved tensors.

def save(ctx, tensors, config, forward=False):
    offsets = [c for c in config if isinstance(c, torch.Tensor)]
    ctx.save_for_backward(*tensors, *offsets)
    if forward:
        ctx.save_for_forward(*tensors, *offsets)
    ctx.config = tuple(None if isinstance(c, torch.Tensor) else c for c in config)
    ctx.offset_slots = tuple(i for i, c in enumerate(config) if isinstance(c, torch.Tensor))


def saved(ctx):
    """(the saved tensors, the config with its offsets back in place)."""
    tensors = ctx.saved_tensors
    count = len(tensors) - len(ctx.offset_slots)
    config = list(ctx.config)
    for i, t in zip(ctx.offset_slots, tensors[count:]):
        config[i] = t
    return tensors[:count], tuple(config)


def forward_setup(ctx, inputs, output, forward=False):
    o, lse = output
    ctx.mark_non_differentiable(lse)
    save(ctx, (*inputs[:3], o, lse), inputs[3:], forward)


def backward_setup(ctx, inputs, output, forward=False):
    save(ctx, inputs[:6], inputs[6:], forward)


def no_edge(o):
    """O as the backward takes it: without its autograd edge to the forward. BoB's gradients
    already contain what flows through O and L (they return None for both), but an edge would
    still lead a second derivative's graph walk to the forward's node, which autograd then calls
    with a zero cotangent: a whole backward of zeros per Hessian-vector product."""
    return o.detach()


def third_derivative(ctx, *grads):
    raise RuntimeError("flashbob: third derivatives of attention are not implemented "
                       "(the backward's backward, BoB, is not differentiable)")


def _forward_grad(ctx, do, _dlse):
    (q, k, v, o, lse), config = saved(ctx)
    dq, dk, dv = torch.ops.flashbob.backward(q, k, v, no_edge(o), lse, do, *config)
    return (dq, dk, dv) + (None,) * CONFIG_ARGS


def _backward_grad(ctx, uq, uk, uv):
    # O and L are functions of q, k, v that BoB already differentiates through: no gradient of
    # their own (the gradient of the backward's outputs reaches q, k, v, dO only).
    (q, k, v, o, lse, do), config = saved(ctx)
    gq, gk, gv, gdo = torch.ops.flashbob.bob(q, k, v, o, lse, do, uq.to(q.dtype), uk.to(k.dtype),
                                             uv.to(v.dtype), *config)
    return (gq, gk, gv, None, None, gdo) + (None,) * CONFIG_ARGS


forward.register_autograd(_forward_grad, setup_context=forward_setup)
backward.register_autograd(_backward_grad, setup_context=backward_setup)
bob.register_autograd(third_derivative, setup_context=lambda ctx, inputs, output: None)
forward_jvp.register_autograd(third_derivative, setup_context=lambda ctx, inputs, output: None)


# --- vmap: the mapped axis joins the batch (a packed batch's: the heads) ------------------------
# The slices of a packed batch share its sequences, so their heads line up as more heads of the
# one batch (and a query head's key/value head stays in its own slice: b * heads_kv + h // group).

def _vmap_rule(op):
    def rule(info, in_dims, *args):
        size = info.batch_size
        tensors, config = args[:-CONFIG_ARGS], args[-CONFIG_ARGS:]
        if any(dim is not None for dim in in_dims[-CONFIG_ARGS:]):
            raise ValueError("flashbob: vmap over cu_seqlens_q or cu_seqlens_k is not supported: "
                             "the mapped slices must share one packed batch's offsets (map over "
                             "q, k, v only)")
        packed = _packed(config)
        flat = []
        for x, dim in zip(tensors, in_dims):
            x = x.movedim(dim, 0) if dim is not None else x.expand(size, *x.shape)
            if packed:
                x = x.transpose(0, 1).flatten(1, 2)
            else:
                x = x.reshape(size * x.shape[1], *x.shape[2:])
            flat.append(x)
        out = op(*flat, *config)

        def split(t):
            if packed:
                return t.unflatten(1, (size, t.shape[1] // size)).transpose(0, 1)
            return t.reshape(size, t.shape[0] // size, *t.shape[1:])
        if isinstance(out, torch.Tensor):
            return split(out), 0
        out = tuple(split(t) for t in out)
        return out, (0,) * len(out)
    return rule


for _op in (forward, backward, bob, forward_jvp):
    _op.register_vmap(_vmap_rule(_op))
del _op
