"""`attention(q, k, v, causal=False, scale=None, window_size=(-1, -1))` for PyTorch, differentiable twice.

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
gQ, gK, gV.

The forward saves L (one float per row), never P. Tensors: (batch, heads, seq, head_dim) bf16 or
fp16 on a CUDA device, any strides (a layout the kernels cannot read is copied inside the
operator, which autograd never sees: the saved inputs are the caller's tensors); work goes on
the current stream.
"""

import torch

from . import _capi

_DTYPES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16}
_int64x4 = _capi.ctypes.c_int64 * 4


# --- inside the operators (eager only: never traced) -------------------------------------------

def _readable(t):
    """`t` as the kernels read it: unit stride along head_dim, rows 16-byte aligned, no stride 0
    (broadcast views), a 16-byte aligned start (a view at an element offset is copied: its
    contiguous() would be itself)."""
    strides = t.stride()
    if (strides[-1] == 1 and all(s > 0 and s % 8 == 0 for s in strides[:3])
            and t.data_ptr() % 16 == 0):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def _tensor(t):
    return _capi.Tensor(t.data_ptr(), _int64x4(*t.stride()))


def _problem(q, k, causal, window_left, window_right, scale):
    b, h, n, d = q.shape
    windowed = window_left >= 0 or window_right >= 0
    return _capi.Problem(b, h, n, k.shape[2], d, _DTYPES[q.dtype], int(causal), float(scale),
                         k.shape[1], int(windowed), window_left, window_right)


def _stream(t):
    return _capi.ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream)


def _empty(t):
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _rows(q, *lead):
    b, h, n, _ = q.shape
    return q.new_empty((*lead, b, h, n), dtype=torch.float32)


@torch.library.custom_op("flashbob::forward", mutates_args=(), device_types="cuda")
def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
             window_left: int, window_right: int,
             scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(O, L); scale 0 means 1/sqrt(head_dim)."""
    q, k, v = _readable(q), _readable(k), _readable(v)
    o, lse = _empty(q), _rows(q)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, causal, window_left, window_right, scale)
        _capi.forward(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o), lse.data_ptr(),
                      _stream(q))
    return o, lse


@_forward.register_fake
def _(q, k, v, *_mask_and_scale):
    return _empty(q), _rows(q)


@torch.library.custom_op("flashbob::backward", mutates_args=(), device_types="cuda")
def _backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
              lse: torch.Tensor, do: torch.Tensor, causal: bool,
              window_left: int, window_right: int,
              scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) from the forward's O and L."""
    q, k, v, o, do = (_readable(t) for t in (q, k, v, o, do))
    lse = lse.contiguous()
    dq, dk, dv = _empty(q), _empty(k), _empty(v)
    workspace = _rows(q)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, causal, window_left, window_right, scale)
        _capi.backward(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o), _tensor(do),
                       lse.data_ptr(), _tensor(dq), _tensor(dk), _tensor(dv),
                       workspace.data_ptr(), _stream(q))
    return dq, dk, dv


@_backward.register_fake
def _(q, k, v, o, lse, do, *_mask_and_scale):
    return _empty(q), _empty(k), _empty(v)


@torch.library.custom_op("flashbob::bob", mutates_args=(), device_types="cuda")
def _bob(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
         do: torch.Tensor, uq: torch.Tensor, uk: torch.Tensor, uv: torch.Tensor, causal: bool,
         window_left: int, window_right: int,
         scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """BoB: the gradients of <uQ, dQ> + <uK, dK> + <uV, dV> with respect to Q, K, V and dO."""
    q, k, v, o, do, uq, uk, uv = (_readable(t) for t in (q, k, v, o, do, uq, uk, uv))
    lse = lse.contiguous()
    gq, gk, gv, gdo = _empty(q), _empty(k), _empty(v), _empty(do)
    workspace = _rows(q, 3)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, causal, window_left, window_right, scale)
        _capi.bob(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o), _tensor(do),
                  lse.data_ptr(), _tensor(uq), _tensor(uk), _tensor(uv), _tensor(gq), _tensor(gk), _tensor(gv), _tensor(gdo), workspace.data_ptr(),
                  _stream(q))
    return gq, gk, gv, gdo


@_bob.register_fake
def _(q, k, v, o, lse, do, uq, uk, uv, *_mask_and_scale):
    return _empty(q), _empty(k), _empty(v), _empty(do)


@torch.library.custom_op("flashbob::forward_jvp", mutates_args=(), device_types="cuda")
def _forward_jvp(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                 lse: torch.Tensor, tq: torch.Tensor, tk: torch.Tensor, tv: torch.Tensor,
                 causal: bool, window_left: int, window_right: int,
                 scale: float) -> torch.Tensor:
    """The forward's JVP: the change of O along tangents (tq, tk, tv) of (q, k, v), from the
    forward's O and L (one kernel: BoB's gdO at u = t, without the rest of BoB)."""
    q, k, v, o, tq, tk, tv = (_readable(t) for t in (q, k, v, o, tq, tk, tv))
    lse = lse.contiguous()
    to = _empty(o)
    with torch.cuda.device(q.device):
        problem = _problem(q, k, causal, window_left, window_right, scale)
        _capi.forward_jvp(problem, _tensor(q), _tensor(k), _tensor(v), _tensor(o),
                          lse.data_ptr(), _tensor(tq), _tensor(tk), _tensor(tv), _tensor(to),
                          _stream(q))
    return to


@_forward_jvp.register_fake
def _(q, k, v, o, lse, tq, tk, tv, *_mask_and_scale):
    return _empty(o)


# --- autograd: forward -> backward -> BoB -------------------------------------------------------
# Every operator ends in the same four non-tensor arguments, (causal, window_left, window_right,
# scale): the mask and the scale, kept on ctx as `config` and passed on as they came.

_CONFIG = 4


def _forward_setup(ctx, inputs, output):
    q, k, v = inputs[:3]
    o, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.config = inputs[3:]


def _forward_grad(ctx, do, _dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.flashbob.backward(q, k, v, o, lse, do, *ctx.config)
    return (dq, dk, dv) + (None,) * _CONFIG


def _backward_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:6])
    ctx.config = inputs[6:]


def _backward_grad(ctx, uq, uk, uv):
    # O and L are functions of q, k, v that BoB already differentiates through: no gradient of
    # their own (the gradient of the backward's outputs reaches q, k, v, dO only).
    q, k, v, o, lse, do = ctx.saved_tensors
    gq, gk, gv, gdo = torch.ops.flashbob.bob(q, k, v, o, lse, do, uq.to(q.dtype), uk.to(k.dtype),
                                             uv.to(v.dtype), *ctx.config)
    return (gq, gk, gv, None, None, gdo) + (None,) * _CONFIG


def _bob_grad(ctx, *grads):
    raise RuntimeError("flashbob: third derivatives of attention are not implemented "
                       "(the backward's backward, BoB, is not differentiable)")


_forward.register_autograd(_forward_grad, setup_context=_forward_setup)
_backward.register_autograd(_backward_grad, setup_context=_backward_setup)
_bob.register_autograd(_bob_grad, setup_context=lambda ctx, inputs, output: None)
_forward_jvp.register_autograd(_bob_grad, setup_context=lambda ctx, inputs, output: None)


# --- vmap: the mapped axis joins the batch ------------------------------------------------------

def _vmap_rule(op):
    def rule(info, in_dims, *args):
        size = info.batch_size
        flat = []
        for x, dim in zip(args, in_dims):
            if isinstance(x, torch.Tensor):
                x = x.movedim(dim, 0) if dim is not None else x.expand(size, *x.shape)
                x = x.reshape(size * x.shape[1], *x.shape[2:])
            flat.append(x)
        out = op(*flat)
        if isinstance(out, torch.Tensor):
            return out.reshape(size, out.shape[0] // size, *out.shape[1:]), 0
        out = tuple(t.reshape(size, t.shape[0] // size, *t.shape[1:]) for t in out)
        return out, (0,) * len(out)
    return rule


for _op in (_forward, _backward, _bob, _forward_jvp):
    _op.register_vmap(_vmap_rule(_op))


# --- the same chain as autograd.Functions, for torch.func ---------------------------------------
# torch.func transforms need autograd.Functions written with setup_context, which the operators'
# registered formulas are not; attention() goes through these (their forward runs the operator
# without recording it, so the two registrations never both apply), and generate_vmap_rule uses
# the operators' vmap rules.

class _AttentionFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, *config):
        return torch.ops.flashbob.forward(q, k, v, *config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _forward_setup(ctx, inputs, output)
        ctx.save_for_forward(*inputs[:3], *output)

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _BackwardFn.apply(q, k, v, o, lse, do, *ctx.config)
        return (dq, dk, dv) + (None,) * _CONFIG

    @staticmethod
    def jvp(ctx, tq, tk, tv, *_tconfig):
        # The forward's JVP J t: BoB's gdO at cotangent u = t, which one kernel computes alone.
        q, k, v, o, lse = ctx.saved_tensors
        tq, tk, tv = _tangents((tq, tk, tv), (q, k, v))
        to = torch.ops.flashbob.forward_jvp(q, k, v, o, lse, tq, tk, tv, *ctx.config)
        return to, None  # L is not differentiable (mark_non_differentiable)


class _BackwardFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, o, lse, do, *config):
        return torch.ops.flashbob.backward(q, k, v, o, lse, do, *config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _backward_setup(ctx, inputs, output)
        ctx.save_for_forward(*inputs[:6])

    @staticmethod
    def backward(ctx, uq, uk, uv):
        q, k, v, o, lse, do = ctx.saved_tensors
        gq, gk, gv, gdo = _BobFn.apply(q, k, v, o, lse, do, uq.to(q.dtype), uk.to(k.dtype),
                                       uv.to(v.dtype), *ctx.config)
        return (gq, gk, gv, None, None, gdo) + (None,) * _CONFIG

    @staticmethod
    def jvp(ctx, tq, tk, tv, _to, _tlse, tdo, *_tconfig):
        # The backward's JVP in direction (t, w) (t on q, k, v; w on dO) is the Hessian term H t,
        # BoB's (gQ, gK, gV) at u = t, plus the backward applied to w. O and L are functions of
        # q, k, v whose change H t already contains, so their tangents add nothing.
        q, k, v, o, lse, do = ctx.saved_tensors
        tq, tk, tv, tdo = _tangents((tq, tk, tv, tdo), (q, k, v, do))
        hq, hk, hv, _ = torch.ops.flashbob.bob(q, k, v, o, lse, do, tq, tk, tv, *ctx.config)
        bq, bk, bv = torch.ops.flashbob.backward(q, k, v, o, lse, tdo, *ctx.config)
        return tuple((h.float() + b.float()).to(h.dtype) for h, b in ((hq, bq), (hk, bk), (hv, bv)))


class _BobFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, o, lse, do, uq, uk, uv, *config):
        return torch.ops.flashbob.bob(q, k, v, o, lse, do, uq, uk, uv, *config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    backward = staticmethod(_bob_grad)

    @staticmethod
    def jvp(ctx, *tangents):
        _bob_grad(ctx)


def _tangents(tangents, like):
    """Tangents as the operators take them: zeros where an input has none, the input's dtype."""
    return tuple(torch.zeros_like(x) if t is None else t.to(x.dtype) for t, x in zip(tangents, like))


# --- the user's entry point (traceable: checks only what torch.compile can see) ---------------

def _check(t, name):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cuda":
        raise ValueError(f"{name} must be a CUDA tensor, got device {t.device}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"{name} must be bfloat16 or float16, got {t.dtype}")
    if t.dim() != 4:
        raise ValueError(f"{name} must be (batch, heads, seq, head_dim), got shape {tuple(t.shape)}")


def _check_shapes(q, k, v):
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch or head_dim")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"k's heads ({k.shape[1]}) must divide q's ({q.shape[1]}): grouped-query "
                         f"attention shares each key/value head among q.shape[1] // k.shape[1] "
                         f"query heads")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError("q, k, v must be on the same device")


def _window(window_size):
    """(left, right) as the operators take them; -1 leaves a side unbounded."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"window_size must be a pair (left, right), got {window_size!r}") from None
    for side, name in ((left, "left"), (right, "right")):
        if not isinstance(side, int) or isinstance(side, bool) or side < -1:
            raise ValueError(f"window_size's {name} side must be an int >= -1 (-1: unbounded), "
                             f"got {side!r}")
    return left, right


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
    left, right = _window(window_size)
    longest = max(q.shape[2], k.shape[2])
    for side, name in ((left, "left"), (right, "right")):
        if side > longest:
            raise ValueError(f"window_size's {name} side ({side}) is larger than the sequences "
                             f"(seq_q {q.shape[2]}, seq_k {k.shape[2]}): pass -1 for no bound")
    config = (bool(causal), left, right, 0.0 if scale is None else float(scale))
    if torch.compiler.is_compiling():
        # Dynamo cannot trace autograd.Functions with a jvp rule; the operator, whose autograd
        # formulas are registered with it, traces without a graph break.
        o, lse = torch.ops.flashbob.forward(q, k, v, *config)
    else:
        o, lse = _AttentionFn.apply(q, k, v, *config)
    return (o, lse) if return_lse else o


_OPS = {"forward": _capi.OP_FORWARD, "backward": _capi.OP_BACKWARD, "bob": _capi.OP_BOB,
        "forward_jvp": _capi.OP_FORWARD_JVP}


def precompile(batch, heads, seq_q, seq_k, head_dim, dtype=torch.bfloat16, causal=False,
               scale=None, ops=("forward", "backward", "bob"), device=None, heads_kv=None,
               window_size=(-1, -1)):
    """Compiles (or loads from the kernel cache) the kernels that `ops` run for this problem on
    `device` (default: the current CUDA device) without running them, so that the first step of
    a training or HVP loop pays no compile time; heads_kv: the key/value heads (default heads),
    window_size as attention()'s. The "flashbob" logger reports each compilation at INFO level
    ("flashbob: compiling bob_q (1/2): <kernel>")."""
    if dtype not in _DTYPES:
        raise TypeError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
    unknown = [op for op in ops if op not in _OPS]
    if unknown:
        raise ValueError(f"ops must be among {sorted(_OPS)}, got {unknown}")
    if scale is not None and not (scale > 0):
        raise ValueError(f"scale must be positive, got {scale}")
    left, right = _window(window_size)
    problem = _capi.Problem(batch, heads, seq_q, seq_k, head_dim, _DTYPES[dtype], int(bool(causal)),
                            0.0 if scale is None else float(scale),
                            heads if heads_kv is None else heads_kv,
                            int(left >= 0 or right >= 0), left, right)
    with torch.cuda.device(device if device is not None else torch.cuda.current_device()):
        for op in ops:
            _capi.precompile(problem, _OPS[op])
