"""`attention(q, k, v, causal=False, scale=None)` for PyTorch, differentiable twice.

    import torch, flashbob.torch as fb
    q, k, v = (torch.randn(1, 8, 4096, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    o = fb.attention(q, k, v, causal=True)
    dq, = torch.autograd.grad(o.square().sum(), q, create_graph=True)   # first backward
    hvp, = torch.autograd.grad(dq, q, torch.ones_like(dq))              # runs BoB

The forward saves L (one float per row), never P. The backward is itself an autograd Function
whose backward is BoB; differentiating BoB (a third derivative) raises RuntimeError. Tensors: (batch, heads, seq, head_dim) bf16 or
fp16 on a CUDA device; work goes on the current stream.
"""

import torch

from . import _capi

_DTYPES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16}


def _layout(t, name):
    """The tensor as the kernels need it: unit stride along head_dim, 16-byte aligned rows."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"{name} must be a CUDA tensor, got device {t.device}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"{name} must be bfloat16 or float16, got {t.dtype}")
    if t.dim() != 4:
        raise ValueError(f"{name} must be (batch, heads, seq, head_dim), got shape {tuple(t.shape)}")
    if t.stride(-1) != 1 or any(s % 8 for s in t.stride()[:3]) or t.data_ptr() % 16:
        t = t.contiguous()
    return t


def _tensor(t):
    return _capi.Tensor(t.data_ptr(), (ctypes_int64x4)(*t.stride()))


ctypes_int64x4 = _capi.ctypes.c_int64 * 4


def _problem(q, k, causal, scale):
    b, h, n, d = q.shape
    return _capi.Problem(b, h, n, k.shape[2], d, _DTYPES[q.dtype], int(bool(causal)),
                         0.0 if scale is None else float(scale))


def _stream(t):
    return _capi.ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream)


def _check_shapes(q, k, v):
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch, heads or head_dim")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError("q, k, v must be on the same device")


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        q, k, v = _layout(q, "q"), _layout(k, "k"), _layout(v, "v")
        _check_shapes(q, k, v)
        b, h, n, _ = q.shape
        o = torch.empty_like(q, memory_format=torch.contiguous_format)
        lse = torch.empty((b, h, n), device=q.device, dtype=torch.float32)
        with torch.cuda.device(q.device):
            _capi.forward(_problem(q, k, causal, scale), _tensor(q), _tensor(k), _tensor(v),
                          _tensor(o), lse.data_ptr(), _stream(q))
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale = causal, scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _AttentionBackward.apply(q, k, v, o, lse, do, ctx.causal, ctx.scale)
        return dq, dk, dv, None, None


class _AttentionBackward(torch.autograd.Function):
    """(q, k, v, dO) -> (dQ, dK, dV); O and L are saved state, functions of q, k, v, and BoB
    already differentiates through them, so they get no gradient of their own."""

    @staticmethod
    def forward(ctx, q, k, v, o, lse, do, causal, scale):
        do = _layout(do, "grad_output")
        b, h, n, _ = q.shape
        dq, dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
        workspace = torch.empty((b, h, n), device=q.device, dtype=torch.float32)
        with torch.cuda.device(q.device):
            _capi.backward(_problem(q, k, causal, scale), _tensor(q), _tensor(k), _tensor(v),
                           _tensor(o), _tensor(do), lse.data_ptr(), _tensor(dq), _tensor(dk),
                           _tensor(dv), workspace.data_ptr(), _stream(q))
        ctx.save_for_backward(q, k, v, o, lse, do)
        ctx.causal, ctx.scale = causal, scale
        return dq, dk, dv

    @staticmethod
    def backward(ctx, uq, uk, uv):
        q, k, v, o, lse, do = ctx.saved_tensors
        uq = torch.zeros_like(q) if uq is None else uq
        uk = torch.zeros_like(k) if uk is None else uk
        uv = torch.zeros_like(v) if uv is None else uv
        gq, gk, gv, gdo = _Bob.apply(q, k, v, o, lse, do, uq, uk, uv, ctx.causal, ctx.scale)
        return gq, gk, gv, None, None, gdo, None, None


class _Bob(torch.autograd.Function):
    """BoB as its own graph node, so that differentiating it (a third derivative) fails loudly
    instead of silently returning zeros."""

    @staticmethod
    def forward(ctx, q, k, v, o, lse, do, uq, uk, uv, causal, scale):
        uq = _layout(uq.to(q.dtype), "grad of dQ")
        uk = _layout(uk.to(k.dtype), "grad of dK")
        uv = _layout(uv.to(v.dtype), "grad of dV")
        b, h, n, _ = q.shape
        gq, gk, gv, gdo = (torch.empty_like(t, memory_format=torch.contiguous_format)
                           for t in (q, k, v, do))
        workspace = torch.empty((3, b, h, n), device=q.device, dtype=torch.float32)
        with torch.cuda.device(q.device):
            _capi.bob(_problem(q, k, causal, scale), _tensor(q), _tensor(k), _tensor(v),
                      _tensor(o), _tensor(do), lse.data_ptr(), _tensor(uq), _tensor(uk), _tensor(uv),
                      _tensor(gq), _tensor(gk), _tensor(gv), _tensor(gdo), workspace.data_ptr(),
                      _stream(q))
        return gq, gk, gv, gdo

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("flashbob: third derivatives of attention are not implemented "
                           "(the backward's backward, BoB, is not differentiable)")


def attention(q, k, v, causal=False, scale=None):
    """softmax(scale * q k^T) v with a causal mask if asked (bottom-right aligned when the
    sequence lengths differ); scale defaults to 1/sqrt(head_dim). Differentiable twice."""
    if scale is not None and not (scale > 0):
        raise ValueError(f"scale must be positive, got {scale}")
    return _Attention.apply(q, k, v, causal, scale)
