"""The autograd chain forward -> backward -> BoB, twice: as torch.func needs it and as eager code
runs it cheaply.

torch.func (grad, vjp, vmap, jvp, jvp of grad) needs autograd.Functions written with
setup_context, with forward-mode rules: _AttentionFn, _BackwardFn, _BobFn. The forward's JVP is
BoB's gdO at cotangent u = t, which flashbob::forward_jvp computes alone; the Hessian term of the
backward's JVP is BoB's gQ, gK, gV. Their forwards run the operators (_ops) when anything may be
watching (FakeTensors or torch.func's wrappers, vmap, a dispatch or torch-function mode), else
the kernels directly: torch.func.grad and jvp run a Function's forward and backward one level
below the transform, on plain tensors, so those calls may be direct too.

Forward mode alone (torch.func.jvp as the only transform, or eager dual tensors) is meant to run
one kernel, not two: _DualFn's forward launches nothing and its forward-mode rule, which
autograd calls right after it, computes O, L and tO in one sweep (fwd_dual) into the forward's
outputs, when dual_ready says that rule will run. Off for now (dual_ready says why).

Eager code on plain tensors (no transform, no mode, no forward-mode AD level) takes a cheaper
chain with the same kernels: _Forward, _Backward, _Bob. A Function written with setup_context
costs its caller Signature.bind of every argument, functorch's unwrapping and, in the backward,
a gradient slot per config argument; the eager chain's Functions take the tensors and one plan
(the C problem, made once per shape) and are applied through autograd's C entry point
(docs/performance.md, "The host path"). A backward that runs without create_graph launches the
kernel without recording a node at all. Anything unusual at backward time (a mode entered since
the forward, forward-mode AD) falls back to the torch.func chain.
"""

import inspect

import torch
import torch.autograd.forward_ad as _forward_ad

from . import _launch, _ops
from ._ops import CONFIG_ARGS, no_edge, saved, third_derivative


# --- may the kernels run directly? --------------------------------------------------------------

try:
    _functorch_level = torch._C._functorch.maybe_current_level
    _functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    _dispatch_modes = torch._C._len_torch_dispatch_stack
    _function_modes = torch._C._is_torch_function_mode_enabled
except AttributeError:  # a torch without these hooks: always the operators
    _functorch_level = None


def plain(*tensors):
    """Whether nothing but eager execution can be watching a call on `tensors`: real tensors (not
    FakeTensors, subclasses or torch.func's wrappers), no torch.func transform, no dispatch or
    torch-function mode. Then the kernels may run without the operators' dispatch, which the
    others need to see."""
    if (_functorch_level is None or _functorch_level() is not None or _dispatch_modes()
            or _function_modes()):
        return False
    for t in tensors:
        if type(t) is not torch.Tensor or _functorch_wrapped(t):
            return False
    return True


def _call(kernel, op, tensors, config):
    """op(*tensors, *config), as the kernel's direct call when plain(*tensors)."""
    if plain(*tensors):
        return kernel(_launch.plan(tensors[0], tensors[1], tensors[2], _launch.Config(*config)),
                      *tensors)
    return op(*tensors, *config)


def _tangents(tangents, like):
    """Tangents as the operators take them: zeros where an input has none, the input's dtype."""
    return tuple(torch.zeros_like(x) if t is None else t.to(x.dtype) for t, x in zip(tangents, like))


# --- the chain for torch.func -------------------------------------------------------------------
# Their forwards run the operator without recording it (autograd.Function's forward runs below
# autograd), so the operators' registered formulas and these never both apply; generate_vmap_rule
# uses the operators' vmap rules.

class _AttentionFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, *config):
        return _call(_launch.forward, torch.ops.flashbob.forward, (q, k, v), config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _ops.forward_setup(ctx, inputs, output, forward=True)

    @staticmethod
    def backward(ctx, do, _dlse):
        (q, k, v, o, lse), config = saved(ctx)
        dq, dk, dv = _BackwardFn.apply(q, k, v, no_edge(o), lse, do, *config)
        return (dq, dk, dv) + (None,) * CONFIG_ARGS

    @staticmethod
    def jvp(ctx, tq, tk, tv, *_tconfig):
        # The forward's JVP J t: BoB's gdO at cotangent u = t, which one kernel computes alone.
        (q, k, v, o, lse), config = saved(ctx)
        tq, tk, tv = _tangents((tq, tk, tv), (q, k, v))
        to = _call(_launch.forward_jvp, torch.ops.flashbob.forward_jvp,
                   (q, k, v, o, lse, tq, tk, tv), config)
        return to, None  # L is not differentiable (mark_non_differentiable)


class _DualFn(_AttentionFn):
    """_AttentionFn whose forward launches nothing: the forward-mode rule that always follows it
    (dual_ready() checked that one will) computes O, L and tO in one sweep (fwd_dual) into the
    outputs the forward allocated. Nothing reads O between the two: autograd calls jvp right
    after setup_context, before the outputs reach the caller. The backward is _AttentionFn's,
    from the O and L that jvp wrote."""

    @staticmethod
    def forward(q, k, v, *config):
        packed = config[4] is not None
        return _launch.empty(q, packed, v.shape[3]), _launch.rows(q)

    @staticmethod
    def jvp(ctx, tq, tk, tv, *_tconfig):
        (q, k, v, o, lse), config = saved(ctx)
        level = _jvp_level()
        if level is None:
            return _DualFn._sweep(q, k, v, o, lse, tq, tk, tv, config), None
        # Under torch.func.jvp the saved tensors and the tangents are the transform's wrappers,
        # which have no storage, and so is every tensor made at its level (tO, a tangent's cast):
        # the sweep runs below the level, on the tensors the wrappers hold (O and L among them,
        # the forward's own outputs, which the wrappers then show), and tO is wrapped back.
        with _current_interpreter().lower():
            q, k, v, o, lse, tq, tk, tv = map(_unwrapped, (q, k, v, o, lse, tq, tk, tv))
            to = _DualFn._sweep(q, k, v, o, lse, tq, tk, tv, tuple(map(_unwrapped, config)))
        return _wrap_for_grad(to, level), None

    @staticmethod
    def _sweep(q, k, v, o, lse, tq, tk, tv, config):
        """tO, with O and L written into o and lse (fwd_dual), all plain tensors."""
        tq, tk, tv = _tangents((tq, tk, tv), (q, k, v))
        plan = _launch.plan(q, k, v, _launch.Config(*config))
        return _launch.forward_dual(plan, q, k, v, tq, tk, tv, o, lse)


try:
    _interpreter_stack = torch._C._functorch.get_interpreter_stack
    _tensor_level = torch._C._functorch.maybe_get_level
    _get_unwrapped = torch._C._functorch.get_unwrapped
    _wrap_for_grad = torch._C._functorch._wrap_for_grad
    _JVP = torch._C._functorch.TransformType.Jvp
    from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter as \
        _current_interpreter
except (AttributeError, ImportError):  # a torch without these hooks: never the deferred forward
    _interpreter_stack = None


_DEFERRED_FORWARD = True  # False: forward mode always runs the forward and forward_jvp kernels


def _unwrapped(t):
    """The tensor a torch.func wrapper holds, through every wrapper (the tangents may come
    wrapped otherwise than the primals); anything else as it is."""
    while isinstance(t, torch.Tensor) and _functorch_wrapped(t):
        t = _get_unwrapped(t)
    return t


def _jvp_level():
    """The level of the one torch.func.jvp that dual_ready allowed, or None (eager forward-mode
    AD, whose tensors are the kernels' own)."""
    stack = _interpreter_stack()
    return stack[0].level() if stack else None


def dual_ready(q, k, v):
    """Whether attention's forward-mode rule will run right after its forward, on tensors the
    kernels take directly, so that _DualFn may defer the forward to it: under eager forward-mode
    AD with a tangent on q, k or v and nothing else watching, or under torch.func.jvp alone (one
    transform, a JVP, whose level wraps q, k or v; nested transforms keep the two kernels).
"""
    if not _DEFERRED_FORWARD:
        return False
    if (_interpreter_stack is None or _functorch_level is None or _dispatch_modes()
            or _function_modes()):
        return False
    stack = _interpreter_stack()
    if not stack:
        if _forward_ad_level() < 0:
            return False
        for t in (q, k, v):
            if type(t) is not torch.Tensor:
                return False
        return any(_forward_ad.unpack_dual(t).tangent is not None for t in (q, k, v))
    if len(stack) != 1 or stack[0].key() != _JVP:
        return False
    level = stack[0].level()
    return any(_tensor_level(t) == level for t in (q, k, v))


class _BackwardFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, o, lse, do, *config):
        return _call(_launch.backward, torch.ops.flashbob.backward, (q, k, v, o, lse, do), config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _ops.backward_setup(ctx, inputs, output, forward=True)

    @staticmethod
    def backward(ctx, uq, uk, uv):
        (q, k, v, o, lse, do), config = saved(ctx)
        gq, gk, gv, gdo = _BobFn.apply(q, k, v, o, lse, do, uq.to(q.dtype), uk.to(k.dtype),
                                       uv.to(v.dtype), *config)
        return (gq, gk, gv, None, None, gdo) + (None,) * CONFIG_ARGS

    @staticmethod
    def jvp(ctx, tq, tk, tv, _to, _tlse, tdo, *_tconfig):
        # The backward's JVP in direction (t, w) (t on q, k, v; w on dO) is the Hessian term H t,
        # BoB's (gQ, gK, gV) at u = t, plus the backward applied to w. O and L are functions of
        # q, k, v whose change H t already contains, so their tangents add nothing.
        (q, k, v, o, lse, do), config = saved(ctx)
        tq, tk, tv, tdo = _tangents((tq, tk, tv, tdo), (q, k, v, do))
        hq, hk, hv, _ = _call(_launch.bob, torch.ops.flashbob.bob,
                              (q, k, v, o, lse, do, tq, tk, tv), config)
        bq, bk, bv = _call(_launch.backward, torch.ops.flashbob.backward,
                           (q, k, v, o, lse, tdo), config)
        return tuple((h.float() + b.float()).to(h.dtype) for h, b in ((hq, bq), (hk, bk), (hv, bv)))


class _BobFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, o, lse, do, uq, uk, uv, *config):
        return _call(_launch.bob, torch.ops.flashbob.bob, (q, k, v, o, lse, do, uq, uk, uv),
                     config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    backward = staticmethod(third_derivative)

    @staticmethod
    def jvp(ctx, *tangents):
        third_derivative(ctx)


# torch's Function.apply binds forward's arguments through inspect.signature(forward) on every
# call of a Function with setup_context; inspect returns a function's __signature__ as it is, so
# the signature is computed once here instead.
for _fn in (_AttentionFn, _DualFn, _BackwardFn, _BobFn):
    _fn.forward.__signature__ = inspect.signature(_fn.forward)
del _fn


# --- the eager chain ----------------------------------------------------------------------------
# Written in autograd.Function's older form (forward takes ctx), which Function.apply passes to
# autograd's C entry point without binding arguments. Every tensor a backward reads is saved
# with save_for_backward (so that an in-place change of an input in between is caught), the plan
# rides on ctx.

def _c_apply(cls):
    """cls.apply without Function.apply's Python layer (its argument binding, its unwrapping of
    functorch's dead wrappers: plain() has ruled those out)."""
    try:
        return torch._C._FunctionBase.__dict__["apply"].__get__(None, cls)
    except (AttributeError, KeyError, TypeError):  # pragma: no cover (another torch's layout)
        return cls.apply


def _needs_grad(*tensors):
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t.requires_grad:
            return True
    return False


def _forward_ad_level():
    """The innermost open forward-mode AD level, -1 for none (0, as if one were open, on a torch
    that does not keep it where this looks)."""
    return getattr(_forward_ad, "_current_level", 0)


def _eager_ok(*tensors):
    """plain(), and no forward-mode AD level open (dual tensors need the forward-mode rules)."""
    return _forward_ad_level() < 0 and plain(*tensors)


def _forward_saved(ctx, q, k, v, plan):
    """(O, L), with what the backward reads saved on ctx."""
    o, lse = _launch.forward(plan, q, k, v)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.plan = plan
    return o, lse


class _Forward(torch.autograd.Function):
    """O (L saved for the backward)."""

    @staticmethod
    def forward(ctx, q, k, v, plan):
        return _forward_saved(ctx, q, k, v, plan)[0]

    @staticmethod
    def backward(ctx, do):
        dq, dk, dv = _eager_backward(ctx, do)
        return dq, dk, dv, None


class _ForwardWithLse(torch.autograd.Function):
    """(O, L), L not differentiable."""

    @staticmethod
    def forward(ctx, q, k, v, plan):
        o, lse = _forward_saved(ctx, q, k, v, plan)
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        if do is None:
            return None, None, None, None
        dq, dk, dv = _eager_backward(ctx, do)
        return dq, dk, dv, None


def _eager_backward(ctx, do):
    q, k, v, o, lse = ctx.saved_tensors
    plan = ctx.plan
    if not _eager_ok(do):  # something watches now that did not at the forward
        return _BackwardFn.apply(q, k, v, no_edge(o), lse, do, *plan.config)
    if _needs_grad(q, k, v, do):  # create_graph: recorded, BoB is its derivative
        return _apply_backward(q, k, v, no_edge(o), lse, do, plan)
    return _launch.backward(plan, q, k, v, o, lse, do)


class _Backward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, o, lse, do, plan):
        dq, dk, dv = _launch.backward(plan, q, k, v, o, lse, do)
        ctx.save_for_backward(q, k, v, o, lse, do)
        ctx.plan = plan
        return dq, dk, dv

    @staticmethod
    def backward(ctx, uq, uk, uv):
        # O and L are functions of q, k, v that BoB already differentiates through: no gradient
        # of their own.
        q, k, v, o, lse, do = ctx.saved_tensors
        plan = ctx.plan
        uq, uk, uv = uq.to(q.dtype), uk.to(k.dtype), uv.to(v.dtype)
        if not _eager_ok(uq, uk, uv):
            gq, gk, gv, gdo = _BobFn.apply(q, k, v, o, lse, do, uq, uk, uv, *plan.config)
        elif _needs_grad(q, k, v, do, uq, uk, uv):  # a node whose backward refuses
            gq, gk, gv, gdo = _apply_bob(q, k, v, o, lse, do, uq, uk, uv, plan)
        else:
            gq, gk, gv, gdo = _launch.bob(plan, q, k, v, o, lse, do, uq, uk, uv)
        return gq, gk, gv, None, None, gdo, None


class _Bob(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, o, lse, do, uq, uk, uv, plan):
        return _launch.bob(plan, q, k, v, o, lse, do, uq, uk, uv)

    backward = staticmethod(third_derivative)


_apply_forward = _c_apply(_Forward)
_apply_forward_with_lse = _c_apply(_ForwardWithLse)
_apply_backward = _c_apply(_Backward)
_apply_bob = _c_apply(_Bob)


def attention(q, k, v, config, plan, with_lse):
    """O, or (O, L) when with_lse, of checked (batch, heads, seq, head_dim) tensors; `plan`: the
    config's plan for q and k when the caller has it (else None)."""
    if torch.compiler.is_compiling():
        # Dynamo cannot trace autograd.Functions with a jvp rule; the operator, whose autograd
        # formulas are registered with it, traces without a graph break.
        o, lse = torch.ops.flashbob.forward(q, k, v, *config)
    elif _eager_ok(q, k, v):
        if plan is None:
            plan = _launch.plan(q, k, v, config)
        if _needs_grad(q, k, v):
            if with_lse:
                return _apply_forward_with_lse(q, k, v, plan)
            return _apply_forward(q, k, v, plan)
        o, lse = _launch.forward(plan, q, k, v)
    elif dual_ready(q, k, v):
        o, lse = _DualFn.apply(q, k, v, *config)
    else:
        o, lse = _AttentionFn.apply(q, k, v, *config)
    return (o, lse) if with_lse else o
