"""The kernels as Python calls on plain CUDA tensors: the C problem, the tensors as the C API
reads them, the outputs, the launch on the current stream. Eager only (never traced): the
operators (_ops) and the autograd chains (_autograd) run these.

Host time is the point of this file (bench/host_path.py takes a call apart): nothing here is
recomputed per call that depends only on the problem (a dense problem's C struct is made once
per shape and configuration), each tensor's layout is read once and the C tensor structs are
filled in one struct.pack_into, the stream is read as an integer, and no device guard is
entered when q's device is current.
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


def problem(q, k, config, value_dim=0):
    """The C problem of (q, k) under `config` (a new struct: ring steps change theirs);
    value_dim: v's head_dim where it differs from q's (0: the same)."""
    b, h, n, d = q.shape
    causal, window_left, window_right, scale, cu_seqlens_q, cu_seqlens_k = config[:6]
    windowed = window_left >= 0 or window_right >= 0
    c = _capi.Problem(b, h, n, k.shape[2], d, DTYPES[q.dtype], int(causal), float(scale),
                      k.shape[1], int(windowed), window_left, window_right)
    if value_dim and value_dim != d:
        c.head_dim_v = value_dim
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

    def __init__(self, q, k, v, config):
        if config[4] is not None:  # the C API reads the offsets as contiguous int32
            config = config._replace(cu_seqlens_q=config[4].contiguous(),
                                     cu_seqlens_k=config[5].contiguous())
        self.config = config
        self.packed = config[4] is not None
        self.c = problem(q, k, config, v.shape[3])


# A dense problem's plan, made once per shape and configuration and never changed after (a
# packed batch's points to its offsets, so it is made per call).
_PLANS = {}
_PLANS_KEPT = 1024


def plan(q, k, v, config):
    if config[4] is not None:
        return Plan(q, k, v, config)
    key = (q.shape, k.shape, v.shape[3], q.dtype, config)
    p = _PLANS.get(key)
    if p is None:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        p = _PLANS[key] = Plan(q, k, v, config)
    return p


def _readable_layout(s, address, packed, head_dim):
    """Whether strides `s` and address are a layout the C API takes: unit stride along
    head_dim, no stride 0 (broadcast views), and rows 16-byte aligned with a 16-byte aligned
    start, which the kernels read in place. A head_dim that is no multiple of 8 the library
    copies into zero-padded memory itself (api/flashbob.h): any positive strides then. A packed
    batch's stride[0] is never read (its one batch)."""
    if head_dim % 8:
        return s[3] == 1 and s[2] > 0 and s[1] > 0 and (packed or s[0] > 0)
    return (s[3] == 1 and s[2] > 0 and s[2] % 8 == 0 and s[1] > 0 and s[1] % 8 == 0
            and (packed or (s[0] > 0 and s[0] % 8 == 0)) and address % 16 == 0)


def readable(t, packed=False):
    """`t` as the C API takes it: itself, or a contiguous copy (a view at an element offset is
    copied too: its contiguous() would be itself)."""
    if _readable_layout(t.stride(), t.data_ptr(), packed, t.shape[3]):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def _inputs(values, packed, *tensors):
    """`tensors` as the kernels read them (readable()), their C structs' values appended to
    `values` (data pointer, then the 4 strides): each tensor's layout read once."""
    ready = []
    for t in tensors:
        s, address = t.stride(), t.data_ptr()
        if not _readable_layout(s, address, packed, t.shape[3]):
            t = t.clone(memory_format=torch.contiguous_format)
            s, address = t.stride(), t.data_ptr()
        ready.append(t)
        values.append(address)
        values.extend(s)
    return ready


def _outputs(values, *tensors):
    for t in tensors:
        values.append(t.data_ptr())
        values.extend(t.stride())


def tensor(t):
    """One C tensor struct (for calls outside the hot path)."""
    return _capi.Tensor(t.data_ptr(), (_capi.ctypes.c_int64 * 4)(*t.stride()))


try:  # the current stream as an integer, without a torch.cuda.Stream object (3 us a call)
    _raw_stream = torch._C._cuda_getCurrentRawStream
    _current_device = torch._C._cuda_getDevice
except AttributeError:  # pragma: no cover (every torch this package supports has them)
    _raw_stream = None
    _current_device = torch.cuda.current_device


def stream(t):
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


_CURRENT = contextlib.nullcontext()


def on_device(t):
    """A guard making t's device current; none when it already is (the usual case, where the
    guard would change nothing and costs 2 us)."""
    index = t.get_device()
    return _CURRENT if index == _current_device() else torch.cuda.device(index)


def empty(t, packed=False, width=None):
    """An output shaped like `t` (`width` wide, when given: O is q's shape at v's head_dim): in
    t's layout when t is dense (a (batch, seq, heads, head_dim) caller's .transpose(1, 2) view
    gets its outputs in that memory order, as SDPA's), else contiguous."""
    if not packed and (width is None or width == t.shape[3]):
        return torch.empty_like(t)  # the usual call, first: nothing else read (the host path)
    b, h, n, d = t.shape
    w = d if width is None else width
    if packed:
        # (total, heads, head_dim) memory, as flash-attn returns it, in t's shape; strided, not a
        # view: a custom Function's view outputs would refuse the caller's in-place ops.
        return t.new_empty_strided((b, h, n, w), (n * h * w, w, h * w, 1))
    # t's dimensions from the largest stride to the smallest (ties in their order), packed.
    shape = (b, h, n, w)
    order = sorted(range(4), key=t.stride, reverse=True)
    strides, step = [0] * 4, 1
    for i in reversed(order):
        strides[i] = step
        step *= shape[i]
    return t.new_empty_strided(shape, strides)


def rows(q, *lead):
    b, h, n, _ = q.shape
    return q.new_empty(*lead, b, h, n, dtype=torch.float32)


# --- the four kernels' calls: outputs allocated, inputs made readable, one C call ---------------

def forward(p, q, k, v):
    """(O, L) of plan `p`."""
    packed, values = p.packed, []
    q, k, v = _inputs(values, packed, q, k, v)
    o, lse = empty(q, packed, v.shape[3]), rows(q)
    _outputs(values, o)
    structs = _capi.tensor_structs(values, 4)
    if q.get_device() == _current_device():  # the usual case: no guard needed (it costs 2 us)
        _capi.forward(p.c, *structs, lse.data_ptr(), stream(q))
    else:
        with torch.cuda.device(q.get_device()):
            _capi.forward(p.c, *structs, lse.data_ptr(), stream(q))
    return o, lse


def backward(p, q, k, v, o, lse, do):
    """(dQ, dK, dV) from the forward's O and L."""
    packed, values = p.packed, []
    q, k, v, o, do = _inputs(values, packed, q, k, v, o, do)
    lse = lse.contiguous()
    dq, dk, dv = empty(q, packed), empty(k, packed), empty(v, packed)
    workspace = rows(q)
    _outputs(values, dq, dk, dv)
    with on_device(q):
        sq, sk, sv, so, sdo, sdq, sdk, sdv = _capi.tensor_structs(values, 8)
        _capi.backward(p.c, sq, sk, sv, so, sdo, lse.data_ptr(), sdq, sdk, sdv,
                       workspace.data_ptr(), stream(q))
    return dq, dk, dv


def bob(p, q, k, v, o, lse, do, uq, uk, uv):
    """BoB: the gradients of <uQ, dQ> + <uK, dK> + <uV, dV> with respect to Q, K, V and dO."""
    packed, values = p.packed, []
    q, k, v, o, do, uq, uk, uv = _inputs(values, packed, q, k, v, o, do, uq, uk, uv)
    lse = lse.contiguous()
    gq, gk, gv, gdo = empty(q, packed), empty(k, packed), empty(v, packed), empty(do, packed)
    workspace = rows(q, 3)
    _outputs(values, gq, gk, gv, gdo)
    with on_device(q):
        sq, sk, sv, so, sdo, suq, suk, suv, sgq, sgk, sgv, sgdo = _capi.tensor_structs(values, 12)
        _capi.bob(p.c, sq, sk, sv, so, sdo, lse.data_ptr(), suq, suk, suv, sgq, sgk, sgv, sgdo,
                  workspace.data_ptr(), stream(q))
    return gq, gk, gv, gdo


def forward_dual(p, q, k, v, tq, tk, tv, o, lse):
    """O, L and the forward's JVP tO in one sweep over the keys (fwd_dual): O and L written into
    `o` and `lse` (allocated by a forward that deferred its kernel to this call, with empty() and
    rows() of the same q), tO returned."""
    packed, values = p.packed, []
    q, k, v, tq, tk, tv = _inputs(values, packed, q, k, v, tq, tk, tv)
    to = empty(q, packed, v.shape[3])
    _outputs(values, o, to)
    with on_device(q):
        sq, sk, sv, stq, stk, stv, so, sto = _capi.tensor_structs(values, 8)
        _capi.forward_dual(p.c, sq, sk, sv, stq, stk, stv, so, lse.data_ptr(), sto, stream(q))
    return to


def forward_jvp(p, q, k, v, o, lse, tq, tk, tv):
    """The forward's JVP: the change of O along tangents (tq, tk, tv) of (q, k, v), from the
    forward's O and L (one kernel: BoB's gdO at u = t, without the rest of BoB)."""
    packed, values = p.packed, []
    q, k, v, o, tq, tk, tv = _inputs(values, packed, q, k, v, o, tq, tk, tv)
    lse = lse.contiguous()
    to = empty(o, packed)
    _outputs(values, to)
    with on_device(q):
        sq, sk, sv, so, stq, stk, stv, sto = _capi.tensor_structs(values, 8)
        _capi.forward_jvp(p.c, sq, sk, sv, so, lse.data_ptr(), stq, stk, stv, sto, stream(q))
    return to
