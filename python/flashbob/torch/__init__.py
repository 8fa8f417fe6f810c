"""`attention(q, k, v, causal=False, scale=None, window_size=(-1, -1))` for PyTorch, differentiable
twice, and `attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, ...)`
for packed batches of variable-length sequences (flash-attn's flash_attn_varlen_func).

    import torch, flashbob.torch as fb
    q, k, v = (torch.randn(1, 8, 4096, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    o = fb.attention(q, k, v, causal=True)
    dq, = torch.autograd.grad(o.square().sum(), q, create_graph=True)   # first backward
    hvp, = torch.autograd.grad(dq, q, torch.ones_like(dq))              # runs BoB

The kernels are torch operators (torch.library.custom_op): flashbob::forward,
flashbob::backward, flashbob::bob and flashbob::forward_jvp. Each has a fake implementation (shapes without running, for
torch.compile), an autograd formula chained to the next (forward's is the backward operator,
whose own is BoB; BoB's raises: a third derivative is not implemented) and a vmap rule, so
torch.compile and grad-of-grad see ordinary operators; attention() chains the same formulas as
autograd.Functions with setup_context, which torch.func (grad, vjp, vmap) needs, and with
forward-mode rules built from the same kernels (torch.func.jvp, and jvp of grad for
forward-over-reverse Hessian-vector products): the forward's JVP is BoB's gdO at cotangent u = t,
which flashbob::forward_jvp computes alone, and the Hessian term of the backward's JVP is BoB's
gQ, gK, gV. Called eagerly on plain tensors (no torch.func transform, no dispatch mode), the
autograd.Functions run an operator's body without its custom_op dispatch, which costs more host
time than the launch; everything that needs to see the operators still does.

Every operator ends in the same config: (causal, window_left, window_right, scale, cu_seqlens_q,
cu_seqlens_k, max_seqlen_q, max_seqlen_k); the offsets are None (and the lengths 0) for a dense
batch. A packed batch's (total, heads, head_dim) tensors enter the operators as their
(1, heads, total, head_dim) views .unsqueeze(0).transpose(1, 2), which the C API reads in place,
and its outputs are allocated in (total, heads, head_dim) memory, so the views back are contiguous.
attention_varlen() runs the same operators and autograd.Functions; vmap over its q, k, v folds the
mapped axis into the heads (the slices share the offsets, which cannot be mapped over).

The forward saves L (one float per row), never P. Tensors: (batch, heads, seq, head_dim) bf16 or
fp16 on a CUDA device, any strides (a layout the kernels cannot read is copied inside the
operator, which autograd never sees: the saved inputs are the caller's tensors); work goes on
the current stream.
"""

import inspect
from typing import Optional

import torch

from .. import _capi, _options

_DTYPES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16}
_int64x4 = _capi.ctypes.c_int64 * 4


# --- inside the operators (eager only: never traced) -------------------------------------------

def _readable(t, packed=False):
    """`t` as the kernels read it: unit stride along head_dim, rows 16-byte aligned, no stride 0
    (broadcast views), a 16-byte aligned start (a view at an element offset is copied: its
    contiguous() would be itself). A packed batch's stride[0] is never read (its one batch)."""
    strides = t.stride()
    if (strides[-1] == 1 and all(s > 0 and s % 8 == 0 for s in strides[1 if packed else 0:3])
            and t.data_ptr() % 16 == 0):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def _tensor(t):
    return _capi.Tensor(t.data_ptr(), _int64x4(*t.stride()))


def _packed(config):
    """Whether the config describes a packed batch (its cu_seqlens_q is a tensor)."""
    return config[4] is not None


def _offsets(config):
    """The config with its offsets as the C API reads them: contiguous int32 (the returned tuple
    keeps any copy alive through the launch)."""
    return (*config[:4], *(None if c is None else c.contiguous() for c in config[4:6]),
            *config[6:])


def _problem(q, k, causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k,
             max_seqlen_q, max_seqlen_k):
    b, h, n, d = q.shape
    windowed = window_left >= 0 or window_right >= 0
    problem = _capi.Problem(b, h, n, k.shape[2], d, _DTYPES[q.dtype], int(causal), float(scale),
                            k.shape[1], int(windowed), window_left, window_right)
    if cu_seqlens_q is not None:  # batch: the sequences; seq_q, seq_k: the packed totals
        problem.batch = cu_seqlens_q.numel() - 1
        problem.varlen = 1
        problem.cu_seqlens_q = cu_seqlens_q.data_ptr()
        problem.cu_seqlens_k = cu_seqlens_k.data_ptr()
        problem.max_seqlen_q, problem.max_seqlen_k = max_seqlen_q, max_seqlen_k
    return problem


def _stream(t):
    return _capi.ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream)


def _empty(t, packed=False):
    if packed:
        # (total, heads, head_dim) memory, as flash-attn returns it, in t's shape; strided, not a
        # view: a custom Function's view outputs would refuse the caller's in-place ops.
        b, h, n, d = t.shape
        return t.new_empty_strided((b, h, n, d), (n * h * d, d, h * d, 1))
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _rows(q, *lead):
    b, h, n, _ = q.shape
    return q.new_empty((*lead, b, h, n), dtype=torch.float32)


def _forward_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  window_left: int, window_right: int, scale: float,
                  cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                  max_seqlen_q: int, max_seqlen_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(O, L); scale 0 means 1/sqrt(head_dim)."""
    config = _offsets((causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k))
    packed = _packed(config)
    q, k, v = (_readable(t, packed) for t in (q, k, v))
    o, lse = _empty(q, packed), _rows(q)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, *config)
        _capi.forward(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o), lse.data_ptr(),
                      _stream(q))
    return o, lse


_forward = torch.library.custom_op("flashbob::forward", mutates_args=(), device_types="cuda")(
    _forward_body)


@_forward.register_fake
def _(q, k, v, *config):
    return _empty(q, _packed(config)), _rows(q)


def _backward_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   lse: torch.Tensor, do: torch.Tensor, causal: bool,
                   window_left: int, window_right: int, scale: float,
                   cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                   max_seqlen_q: int,
                   max_seqlen_k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) from the forward's O and L."""
    config = _offsets((causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k))
    packed = _packed(config)
    q, k, v, o, do = (_readable(t, packed) for t in (q, k, v, o, do))
    lse = lse.contiguous()
    dq, dk, dv = _empty(q, packed), _empty(k, packed), _empty(v, packed)
    workspace = _rows(q)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, *config)
        _capi.backward(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o), _tensor(do),
                       lse.data_ptr(), _tensor(dq), _tensor(dk), _tensor(dv),
                       workspace.data_ptr(), _stream(q))
    return dq, dk, dv


_backward = torch.library.custom_op("flashbob::backward", mutates_args=(), device_types="cuda")(
    _backward_body)


@_backward.register_fake
def _(q, k, v, o, lse, do, *config):
    packed = _packed(config)
    return _empty(q, packed), _empty(k, packed), _empty(v, packed)


def _bob_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
              do: torch.Tensor, uq: torch.Tensor, uk: torch.Tensor, uv: torch.Tensor, causal: bool,
              window_left: int, window_right: int, scale: float,
              cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
              max_seqlen_q: int,
              max_seqlen_k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """BoB: the gradients of <uQ, dQ> + <uK, dK> + <uV, dV> with respect to Q, K, V and dO."""
    config = _offsets((causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k))
    packed = _packed(config)
    q, k, v, o, do, uq, uk, uv = (_readable(t, packed) for t in (q, k, v, o, do, uq, uk, uv))
    lse = lse.contiguous()
    gq, gk, gv, gdo = (_empty(t, packed) for t in (q, k, v, do))
    workspace = _rows(q, 3)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, *config)
        _capi.bob(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o), _tensor(do),
                  lse.data_ptr(), _tensor(uq), _tensor(uk), _tensor(uv), _tensor(gq),
                  _tensor(gk), _tensor(gv), _tensor(gdo), workspace.data_ptr(), _stream(q))
    return gq, gk, gv, gdo


_bob = torch.library.custom_op("flashbob::bob", mutates_args=(), device_types="cuda")(
    _bob_body)


@_bob.register_fake
def _(q, k, v, o, lse, do, uq, uk, uv, *config):
    packed = _packed(config)
    return tuple(_empty(t, packed) for t in (q, k, v, do))


def _forward_jvp_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                      lse: torch.Tensor, tq: torch.Tensor, tk: torch.Tensor, tv: torch.Tensor,
                      causal: bool, window_left: int, window_right: int, scale: float,
                      cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                      max_seqlen_q: int, max_seqlen_k: int) -> torch.Tensor:
    """The forward's JVP: the change of O along tangents (tq, tk, tv) of (q, k, v), from the
    forward's O and L (one kernel: BoB's gdO at u = t, without the rest of BoB)."""
    config = _offsets((causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k))
    packed = _packed(config)
    q, k, v, o, tq, tk, tv = (_readable(t, packed) for t in (q, k, v, o, tq, tk, tv))
    lse = lse.contiguous()
    to = _empty(o, packed)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, *config)
        _capi.forward_jvp(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o),
                          lse.data_ptr(), _tensor(tq), _tensor(tk), _tensor(tv), _tensor(to),
                          _stream(q))
    return to


_forward_jvp = torch.library.custom_op("flashbob::forward_jvp", mutates_args=(),
                                       device_types="cuda")(_forward_jvp_body)


@_forward_jvp.register_fake
def _(q, k, v, o, lse, tq, tk, tv, *config):
    return _empty(o, _packed(config))


# --- autograd: forward -> backward -> BoB -------------------------------------------------------
# Every operator ends in the same config, (causal, window_left, window_right, scale,
# cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k): passed on as it came, none of it
# differentiable. Its offsets are saved as tensors (not kept on ctx), so that torch.func's
# transforms unwrap and rewrap them as they do the other saved tensors.

_CONFIG = 8


def _save(ctx, tensors, config, forward=False):
    offsets = [c for c in config if isinstance(c, torch.Tensor)]
    ctx.save_for_backward(*tensors, *offsets)
    if forward:
        ctx.save_for_forward(*tensors, *offsets)
    ctx.config = tuple(None if isinstance(c, torch.Tensor) else c for c in config)
    ctx.offset_slots = tuple(i for i, c in enumerate(config) if isinstance(c, torch.Tensor))


def _saved(ctx):
    """(the saved tensors, the config with its offsets back in place)."""
    saved = ctx.saved_tensors
    count = len(saved) - len(ctx.offset_slots)
    config = list(ctx.config)
    for i, t in zip(ctx.offset_slots, saved[count:]):
        config[i] = t
    return saved[:count], tuple(config)


def _forward_setup(ctx, inputs, output, forward=False):
    o, lse = output
    ctx.mark_non_differentiable(lse)
    _save(ctx, (*inputs[:3], o, lse), inputs[3:], forward)


def _no_edge(o):
    """O as the backward takes it: without its autograd edge to the forward. BoB's gradients
    already contain what flows through O and L (they return None for both), but an edge would
    still lead a second derivative's graph walk to the forward's node, which autograd then calls
    with a zero cotangent: a whole backward of zeros per Hessian-vector product."""
    return o.detach()


def _forward_grad(ctx, do, _dlse):
    (q, k, v, o, lse), config = _saved(ctx)
    dq, dk, dv = torch.ops.flashbob.backward(q, k, v, _no_edge(o), lse, do, *config)
    return (dq, dk, dv) + (None,) * _CONFIG


def _backward_setup(ctx, inputs, output, forward=False):
    _save(ctx, inputs[:6], inputs[6:], forward)


def _backward_grad(ctx, uq, uk, uv):
    # O and L are functions of q, k, v that BoB already differentiates through: no gradient of
    # their own (the gradient of the backward's outputs reaches q, k, v, dO only).
    (q, k, v, o, lse, do), config = _saved(ctx)
    gq, gk, gv, gdo = torch.ops.flashbob.bob(q, k, v, o, lse, do, uq.to(q.dtype), uk.to(k.dtype),
                                             uv.to(v.dtype), *config)
    return (gq, gk, gv, None, None, gdo) + (None,) * _CONFIG


def _bob_grad(ctx, *grads):
    raise RuntimeError("flashbob: third derivatives of attention are not implemented "
                       "(the backward's backward, BoB, is not differentiable)")


_forward.register_autograd(_forward_grad, setup_context=_forward_setup)
_backward.register_autograd(_backward_grad, setup_context=_backward_setup)
_bob.register_autograd(_bob_grad, setup_context=lambda ctx, inputs, output: None)
_forward_jvp.register_autograd(_bob_grad, setup_context=lambda ctx, inputs, output: None)


# --- vmap: the mapped axis joins the batch (a packed batch's: the heads) ------------------------
# The slices of a packed batch share its sequences, so their heads line up as more heads of the
# one batch (and a query head's key/value head stays in its own slice: b * heads_kv + h // group).

def _vmap_rule(op):
    def rule(info, in_dims, *args):
        size = info.batch_size
        tensors, config = args[:-_CONFIG], args[-_CONFIG:]
        if any(dim is not None for dim in in_dims[-_CONFIG:]):
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


for _op in (_forward, _backward, _bob, _forward_jvp):
    _op.register_vmap(_vmap_rule(_op))


# --- eager calls without the operator's dispatch ------------------------------------------------
# torch.library.custom_op's dispatch (binding the arguments to the schema, checking the results
# for aliases, its autograd and backend layers) cost about 190 us a call on the H200, against
# 28 us for the C call with the launch (bench/results/2026-12-02-h200-cold-start.md). The
# autograd.Functions below run an operator's body directly when nothing but eager execution can
# be watching: real tensors (not FakeTensors or torch.func's wrappers), no torch.func transform,
# no dispatch or torch-function mode. Anything else goes through the operator, which those need
# to see. torch.func.grad and jvp see the autograd.Functions themselves and run their forward and
# backward one level below the transform, on plain tensors, so those calls may be direct too;
# vmap's batched tensors always take the operator and its vmap rule. The body is the same code
# either way.

try:
    _functorch_level = torch._C._functorch.maybe_current_level
    _functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    _dispatch_modes = torch._C._len_torch_dispatch_stack
    _function_modes = torch._C._is_torch_function_mode_enabled
except AttributeError:  # a torch without these hooks: always the operator
    _functorch_level = None


def _direct(args):
    if (_functorch_level is None or _functorch_level() is not None or _dispatch_modes()
            or _function_modes()):
        return False
    return all(type(a) is torch.Tensor and not _functorch_wrapped(a)
               for a in args if isinstance(a, torch.Tensor))


def _call(body, op, *args):
    """op(*args), through its body when _direct(args)."""
    return body(*args) if _direct(args) else op(*args)


# --- the same chain as autograd.Functions, for torch.func ---------------------------------------
# torch.func transforms need autograd.Functions written with setup_context, which the operators'
# registered formulas are not; attention() goes through these (their forward runs the operator
# without recording it, so the two registrations never both apply), and generate_vmap_rule uses
# the operators' vmap rules.

class _AttentionFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, *config):
        return _call(_forward_body, torch.ops.flashbob.forward, q, k, v, *config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _forward_setup(ctx, inputs, output, forward=True)

    @staticmethod
    def backward(ctx, do, _dlse):
        (q, k, v, o, lse), config = _saved(ctx)
        dq, dk, dv = _BackwardFn.apply(q, k, v, _no_edge(o), lse, do, *config)
        return (dq, dk, dv) + (None,) * _CONFIG

    @staticmethod
    def jvp(ctx, tq, tk, tv, *_tconfig):
        # The forward's JVP J t: BoB's gdO at cotangent u = t, which one kernel computes alone.
        (q, k, v, o, lse), config = _saved(ctx)
        tq, tk, tv = _tangents((tq, tk, tv), (q, k, v))
        to = _call(_forward_jvp_body, torch.ops.flashbob.forward_jvp, q, k, v, o, lse, tq, tk, tv,
                   *config)
        return to, None  # L is not differentiable (mark_non_differentiable)


class _BackwardFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, o, lse, do, *config):
        return _call(_backward_body, torch.ops.flashbob.backward, q, k, v, o, lse, do, *config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _backward_setup(ctx, inputs, output, forward=True)

    @staticmethod
    def backward(ctx, uq, uk, uv):
        (q, k, v, o, lse, do), config = _saved(ctx)
        gq, gk, gv, gdo = _BobFn.apply(q, k, v, o, lse, do, uq.to(q.dtype), uk.to(k.dtype),
                                       uv.to(v.dtype), *config)
        return (gq, gk, gv, None, None, gdo) + (None,) * _CONFIG

    @staticmethod
    def jvp(ctx, tq, tk, tv, _to, _tlse, tdo, *_tconfig):
        # The backward's JVP in direction (t, w) (t on q, k, v; w on dO) is the Hessian term H t,
        # BoB's (gQ, gK, gV) at u = t, plus the backward applied to w. O and L are functions of
        # q, k, v whose change H t already contains, so their tangents add nothing.
        (q, k, v, o, lse, do), config = _saved(ctx)
        tq, tk, tv, tdo = _tangents((tq, tk, tv, tdo), (q, k, v, do))
        hq, hk, hv, _ = _call(_bob_body, torch.ops.flashbob.bob, q, k, v, o, lse, do, tq, tk, tv,
                              *config)
        bq, bk, bv = _call(_backward_body, torch.ops.flashbob.backward, q, k, v, o, lse, tdo,
                           *config)
        return tuple((h.float() + b.float()).to(h.dtype) for h, b in ((hq, bq), (hk, bk), (hv, bv)))


class _BobFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, o, lse, do, uq, uk, uv, *config):
        return _call(_bob_body, torch.ops.flashbob.bob, q, k, v, o, lse, do, uq, uk, uv, *config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    backward = staticmethod(_bob_grad)

    @staticmethod
    def jvp(ctx, *tangents):
        _bob_grad(ctx)


# torch's Function.apply binds forward's arguments through inspect.signature(forward) on every
# call of a Function with setup_context; inspect returns a function's __signature__ as it is, so
# the signature is computed once here instead (bench/NOTES.md "Warm host overhead").
for _fn in (_AttentionFn, _BackwardFn, _BobFn):
    _fn.forward.__signature__ = inspect.signature(_fn.forward)
del _fn


def _tangents(tangents, like):
    """Tangents as the operators take them: zeros where an input has none, the input's dtype."""
    return tuple(torch.zeros_like(x) if t is None else t.to(x.dtype) for t, x in zip(tangents, like))


# --- the user's entry point (traceable: checks only what torch.compile can see) ---------------

def _check(t, name, packed=False):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cuda":
        raise ValueError(f"{name} must be a CUDA tensor, got device {t.device}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"{name} must be bfloat16 or float16, got {t.dtype}")
    if t.dim() != (3 if packed else 4):
        layout = "(total, heads, head_dim)" if packed else "(batch, heads, seq, head_dim)"
        raise ValueError(f"{name} must be {layout}, got shape {tuple(t.shape)}")


def _check_shapes(q, k, v, packed=False):
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if packed:
        if q.shape[2] != k.shape[2]:
            raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in head_dim")
    elif q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch or head_dim")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"k's heads ({k.shape[1]}) must divide q's ({q.shape[1]}): grouped-query "
                         f"attention shares each key/value head among q.shape[1] // k.shape[1] "
                         f"query heads")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError("q, k, v must be on the same device")


def attention(q, k, v, causal=False, scale=None, return_lse=False, window_size=(-1, -1)):
    """softmax(scale * q k^T) v with a causal mask if asked (bottom-right aligned when the
    sequence lengths differ); scale defaults to 1/sqrt(head_dim). Differentiable twice.

    q: (batch, heads, seq_q, head_dim); k, v: (batch, heads_kv, seq_k, head_dim), heads_kv a
    divisor of heads (grouped-query attention, 1 for multi-query; as SDPA's enable_gqa): query
    head h attends with key/value head h // (heads // heads_kv), and the gradients of k and v sum
    over each group inside the kernels, K and V never repeated. Tensors laid out (batch, seq,
    heads, head_dim), as flash-attn takes them, are passed as their .transpose(1, 2) views: the
    kernels read those strides directly, no copy.

    window_size: (left, right), flash-attn's sliding window: query i sees key j only if
    i + seq_k - seq_q - left <= j <= i + seq_k - seq_q + right; -1 leaves a side unbounded, and
    causal=True makes right 0 (so (-1, 0) is the causal mask). The kernels skip the blocks
    outside the window: the cost grows with seq_q x window.

    return_lse: also return L, the natural log-sum-exp of each query row of scale * q k^T
    (batch, heads, seq_q) float32, -inf for a row that sees no key; not differentiable."""
    if scale is not None and not (scale > 0):
        raise ValueError(f"scale must be positive, got {scale}")
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check(t, name)
    _check_shapes(q, k, v)
    left, right = _options.window(window_size)
    longest = max(q.shape[2], k.shape[2])
    for side, name in ((left, "left"), (right, "right")):
        if side > longest:
            raise ValueError(f"window_size's {name} side ({side}) is larger than the sequences "
                             f"(seq_q {q.shape[2]}, seq_k {k.shape[2]}): pass -1 for no bound")
    config = (bool(causal), left, right, 0.0 if scale is None else float(scale), None, None, 0, 0)
    o, lse = _run(q, k, v, config)
    return (o, lse) if return_lse else o


def _run(q, k, v, config):
    if torch.compiler.is_compiling():
        # Dynamo cannot trace autograd.Functions with a jvp rule; the operator, whose autograd
        # formulas are registered with it, traces without a graph break.
        return torch.ops.flashbob.forward(q, k, v, *config)
    return _AttentionFn.apply(q, k, v, *config)


def _check_offsets(cu_seqlens_q, cu_seqlens_k, q):
    """What the offsets' metadata must be; their contents are the C API's to check (it reads them
    back), which names the argument too."""
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of int32 offsets, got {type(t).__name__}")
        if t.dtype != torch.int32:
            raise TypeError(f"{name} must be int32, got {t.dtype}")
        if t.dim() != 1:
            raise ValueError(f"{name} must be 1-D (batch + 1 offsets), got shape {tuple(t.shape)}")
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    if cu_seqlens_q.shape[0] != cu_seqlens_k.shape[0]:
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have the same length (batch + 1), got "
                         f"{cu_seqlens_q.shape[0]} and {cu_seqlens_k.shape[0]}")
    if cu_seqlens_q.shape[0] < 2:
        raise ValueError(f"cu_seqlens_q must hold batch + 1 >= 2 offsets, got {cu_seqlens_q.shape[0]}")


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, scale=None, return_lse=False, window_size=(-1, -1)):
    """attention() over a packed batch of variable-length sequences, flash-attn's
    flash_attn_varlen_func: sequence s has the query rows cu_seqlens_q[s] .. cu_seqlens_q[s + 1]
    - 1 and the key rows cu_seqlens_k[s] .. cu_seqlens_k[s + 1] - 1, and attends only to
    itself. Differentiable twice, as attention() (torch.func and torch.compile included).

    q: (total_q, heads, head_dim); k, v: (total_k, heads_kv, head_dim), heads_kv a divisor of
    heads (grouped-query attention). cu_seqlens_q, cu_seqlens_k: int32 tensors of batch + 1
    offsets on q's device (0, the running sums of the lengths, the total); a sequence may have
    no query rows or no key rows (its rows of o are then 0, of lse -inf). max_seqlen_q,
    max_seqlen_k: ints, at least the longest sequence's rows (a larger bound is clamped to the
    total). The offsets are checked (read back, a synchronization) unless the stream is being
    captured into a CUDA graph.

    causal and window_size hold within each sequence, bottom-right aligned in its own rows: its
    query i sees its key j only if i + m - n - left <= j <= i + m - n + right (n, m: its
    lengths; causal makes right 0).

    Returns o (total_q, heads, head_dim), and with return_lse also L (heads, total_q) float32,
    not differentiable."""
    if scale is not None and not (scale > 0):
        raise ValueError(f"scale must be positive, got {scale}")
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check(t, name, packed=True)
    _check_shapes(q, k, v, packed=True)
    _check_offsets(cu_seqlens_q, cu_seqlens_k, q)
    for t, name in ((q, "q"), (k, "k")):
        if t.shape[0] == 0:
            raise ValueError(f"{name} holds no rows: a packed batch needs at least one query row "
                             f"and one key row in all")
    max_seqlen_q = _options.longest(max_seqlen_q, "max_seqlen_q", q.shape[0],
                                     lambda v: isinstance(v, torch.Tensor), (int, torch.SymInt))
    max_seqlen_k = _options.longest(max_seqlen_k, "max_seqlen_k", k.shape[0],
                                     lambda v: isinstance(v, torch.Tensor), (int, torch.SymInt))
    left, right = _options.window(window_size)
    longest = max(max_seqlen_q, max_seqlen_k)
    for side, name in ((left, "left"), (right, "right")):
        if side > longest:
            raise ValueError(f"window_size's {name} side ({side}) is larger than the sequences "
                             f"(max_seqlen_q {max_seqlen_q}, max_seqlen_k {max_seqlen_k}): pass "
                             f"-1 for no bound")
    config = (bool(causal), left, right, 0.0 if scale is None else float(scale), cu_seqlens_q,
              cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    # (1, heads, total, head_dim) views of the packed memory: the C API reads their strides.
    o, lse = _run(q.unsqueeze(0).transpose(1, 2), k.unsqueeze(0).transpose(1, 2),
                  v.unsqueeze(0).transpose(1, 2), config)
    o, lse = o.transpose(1, 2).squeeze(0), lse.squeeze(0)
    return (o, lse) if return_lse else o


_OPS = {"forward": _capi.OP_FORWARD, "backward": _capi.OP_BACKWARD, "bob": _capi.OP_BOB,
        "forward_jvp": _capi.OP_FORWARD_JVP}


def precompile(batch, heads, seq_q, seq_k, head_dim, dtype=torch.bfloat16, causal=False,
               scale=None, ops=("forward", "backward", "bob"), device=None, heads_kv=None,
               window_size=(-1, -1), varlen=False):
    """Compiles (or loads from the kernel cache) the kernels that `ops` run for this problem on
    `device` (default: the current CUDA device) without running them, so that the first step of
    a training or HVP loop pays no compile time; heads_kv: the key/value heads (default heads),
    window_size as attention()'s. varlen=True: attention_varlen()'s kernels (kernels of their
    own), batch then the number of sequences and seq_q, seq_k the packed totals. The kernels of
    all the ops compile at once, each on a thread of its own. The "flashbob" logger reports each
    compilation at INFO level ("flashbob: compiling bob_q (4/5): <kernel>": its place among the
    ops' kernels)."""
    if dtype not in _DTYPES:
        raise TypeError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
    unknown = [op for op in ops if op not in _OPS]
    if unknown:
        raise ValueError(f"ops must be among {sorted(_OPS)}, got {unknown}")
    if scale is not None and not (scale > 0):
        raise ValueError(f"scale must be positive, got {scale}")
    left, right = _options.window(window_size)
    problem = _capi.Problem(batch, heads, seq_q, seq_k, head_dim, _DTYPES[dtype], int(bool(causal)),
                            0.0 if scale is None else float(scale),
                            heads if heads_kv is None else heads_kv,
                            int(left >= 0 or right >= 0), left, right)
    if varlen:
        # No size picks a kernel: the totals stand for the longest sequences (the C API checks
        # only sizes here, so no offsets are needed).
        problem.varlen = 1
        problem.max_seqlen_q, problem.max_seqlen_k = seq_q, seq_k
    with torch.cuda.device(device if device is not None else torch.cuda.current_device()):
        _capi.precompile_ops(problem, [_OPS[op] for op in ops])  # every kernel at once
