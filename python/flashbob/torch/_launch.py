"""The kernels as Python calls on plain CUDA tensors: the C problem, the tensors as the C API
reads them, the outputs, the launch on the current stream. Eager only (never traced): the
operators (_ops) and the autograd chains (_autograd) run these.

Host time is the point of this file (bench/host_path.py takes a call apart): nothing here is
recomputed per call that depends only on the problem (a dense problem's C struct is made once
per shape and configuration), the C tensor structs are filled in one struct.pack_into, the
stream is read as an integer, and no device guard is entered when q's device is current.
"""

import contextlib
from typing import NamedTuple, Optional

import torch

from .. import _capi

DTYPES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16}


class Config(NamedTuple):
    """What every operator takes after its tensors, in the operators' order. The offsets are None
    (and the lengths 0) for a dense batch; scale 0 means 1/sqrt(head_dim)."""
    causal: bool
    window_left: int
    window_right: int
    scale: float
    cu_seqlens_q: Optional[torch.Tensor]
    cu_seqlens_k: Optional[torch.Tensor]
    max_seqlen_q: int
    max_seqlen_k: int


DENSE = Config(False, -1, -1, 0.0, None, None, 0, 0)


def problem(q, k, config):
    """The C problem of (q, k) under `config` (a new struct: ring steps change theirs)."""
    b, h, n, d = q.shape
    causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k = config[:6]
    windowed = window_left >= 0 or window_right >= 0
    c = _capi.Problem(b, h, n, k.shape[2], d, DTYPES[q.dtype], int(causal), float(scale),
                      k.shape[1], int(windowed), window_left, window_right)
    if cu_seqlens_q is not None:  # batch: the sequences; seq_q, seq_k: the packed totals
        c.batch = cu_seqlens_q.numel() - 1
        c.varlen = 1
        c.cu_seqlens_q = cu_seqlens_q.data_ptr()
        c.cu_seqlens_k = cu_seqlens_k.data_ptr()
        c.max_seqlen_q, c.max_seqlen_k = config[6], config[7]
    return c


class Plan:
    """A problem ready to launch: its C struct, whether the batch is packed, and the offsets the
    struct points to (contiguous int32, kept alive as long as the plan)."""
    __slots__ = ("c", "packed", "config")

    def __init__(self, q, k, config):
        if config[4] is not None:  # the C API reads the offsets as contiguous int32
            config = config._replace(cu_seqlens_q=config[4].contiguous(),
                                     cu_seqlens_k=config[5].contiguous())
        self.config = config
        self.packed = config[4] is not None
        self.c = problem(q, k, config)


# A dense problem's plan, made once per shape and configuration and never changed after (a
# packed batch's points to its offsets, so it is made per call).
_PLANS = {}
_PLANS_KEPT = 1024


def plan(q, k, config):
    if config[4] is not None:
        return Plan(q, k, config)
    key = (q.shape, k.shape, q.dtype, config)
    p = _PLANS.get(key)
    if p is None:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        p = _PLANS[key] = Plan(q, k, config)
    return p


def readable(t, packed=False):
    """`t` as the kernels read it: unit stride along head_dim, rows 16-byte aligned, no stride 0
    (broadcast views), a 16-byte aligned start (a view at an element offset is copied: its
    contiguous() would be itself). A packed batch's stride[0] is never read (its one batch)."""
    s = t.stride()
    if (s[3] == 1 and s[2] > 0 and s[2] % 8 == 0 and s[1] > 0 and s[1] % 8 == 0
            and (packed or (s[0] > 0 and s[0] % 8 == 0)) and t.data_ptr() % 16 == 0):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def tensor(t):
    """One C tensor struct (for calls outside the hot path; structs() fills several at once)."""
    return _capi.Tensor(t.data_ptr(), (_capi.ctypes.c_int64 * 4)(*t.stride()))


def structs(*tensors):
    """The C tensor structs of `tensors`, in order: views of this thread's buffer, valid until
    its next structs() (ctypes copies a struct passed by value when the call is made)."""
    values = []
    for t in tensors:
        values.append(t.data_ptr())
        values.extend(t.stride())
    return _capi.tensor_structs(values, len(tensors))


try:  # the current stream as an integer, without a torch.cuda.Stream object (3 us a call)
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover (every torch this package supports has it)
    _raw_stream = None


def stream(t):
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


_CURRENT = contextlib.nullcontext()


def on_device(t):
    """A guard making t's device current; none when it already is (the usual case, where the
    guard would change nothing and costs 2 us)."""
    index = t.get_device()
    return _CURRENT if index == torch.cuda.current_device() else torch.cuda.device(index)


def empty(t, packed=False):
    if packed:
        # (total, heads, head_dim) memory, as flash-attn returns it, in t's shape; strided, not a
        # view: a custom Function's view outputs would refuse the caller's in-place ops.
        b, h, n, d = t.shape
        return t.new_empty_strided((b, h, n, d), (n * h * d, d, h * d, 1))
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def rows(q, *lead):
    b, h, n, _ = q.shape
    return q.new_empty((*lead, b, h, n), dtype=torch.float32)


# --- the four kernels' calls: outputs allocated, inputs made readable, one C call ---------------

def forward(p, q, k, v):
    """(O, L) of plan `p`."""
    packed = p.packed
    q, k, v = readable(q, packed), readable(k, packed), readable(v, packed)
    o, lse = empty(q, packed), rows(q)
    with on_device(q):
        _capi.forward(p.c, *structs(q, k, v, o), lse.data_ptr(), stream(q))
    return o, lse


def backward(p, q, k, v, o, lse, do):
    """(dQ, dK, dV) from the forward's O and L."""
    packed = p.packed
    q, k, v, o, do = (readable(t, packed) for t in (q, k, v, o, do))
    lse = lse.contiguous()
    dq, dk, dv = empty(q, packed), empty(k, packed), empty(v, packed)
    workspace = rows(q)
    with on_device(q):
        sq, sk, sv, so, sdo, sdq, sdk, sdv = structs(q, k, v, o, do, dq, dk, dv)
        _capi.backward(p.c, sq, sk, sv, so, sdo, lse.data_ptr(), sdq, sdk, sdv,
                       workspace.data_ptr(), stream(q))
    return dq, dk, dv


def bob(p, q, k, v, o, lse, do, uq, uk, uv):
    """BoB: the gradients of <uQ, dQ> + <uK, dK> + <uV, dV> with respect to Q, K, V and dO."""
    packed = p.packed
    q, k, v, o, do, uq, uk, uv = (readable(t, packed) for t in (q, k, v, o, do, uq, uk, uv))
    lse = lse.contiguous()
    gq, gk, gv, gdo = empty(q, packed), empty(k, packed), empty(v, packed), empty(do, packed)
    workspace = rows(q, 3)
    with on_device(q):
        sq, sk, sv, so, sdo, suq, suk, suv, sgq, sgk, sgv, sgdo = structs(
            q, k, v, o, do, uq, uk, uv, gq, gk, gv, gdo)
        _capi.bob(p.c, sq, sk, sv, so, sdo, lse.data_ptr(), suq, suk, suv, sgq, sgk, sgv, sgdo,
                  workspace.data_ptr(), stream(q))
    return gq, gk, gv, gdo


def forward_jvp(p, q, k, v, o, lse, tq, tk, tv):
    """The forward's JVP: the change of O along tangents (tq, tk, tv) of (q, k, v), from the
    forward's O and L (one kernel: BoB's gdO at u = t, without the rest of BoB)."""
    packed = p.packed
    q, k, v, o, tq, tk, tv = (readable(t, packed) for t in (q, k, v, o, tq, tk, tv))
    lse = lse.contiguous()
    to = empty(o, packed)
    with on_device(q):
        sq, sk, sv, so, stq, stk, stv, sto = structs(q, k, v, o, tq, tk, tv, to)
        _capi.forward_jvp(p.c, sq, sk, sv, so, lse.data_ptr(), stq, stk, stv, sto, stream(q))
    return to
