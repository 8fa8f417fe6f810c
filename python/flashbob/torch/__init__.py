"""`attention(q, k, v, causal=False, scale=None, window_size=(-1, -1))` for PyTorch, differentiable
twice, and `attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, ...)`
for packed batches of variable-length sequences (flash-attn's flash_attn_varlen_func).

    import torch, flashbob.torch as fb
    q, k, v = (torch.randn(1, 8, 4096, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    o = fb.attention(q, k, v, causal=True)
    dq, = torch.autograd.grad(o.square().sum(), q, create_graph=True)   # first backward
    hvp, = torch.autograd.grad(dq, q, torch.ones_like(dq))              # runs BoB

The kernels are torch operators (torch.library.custom_op, in _ops): flashbob::forward,
flashbob::backward, flashbob::bob and flashbob::forward_jvp, with fake implementations, autograd
formulas chained forward -> backward -> BoB (BoB's raises: a third derivative is not
implemented) and vmap rules, so torch.compile and grad-of-grad see ordinary operators.
attention() chains the same formulas as autograd.Functions (_autograd): with setup_context and
forward-mode rules for torch.func (grad, vjp, vmap, jvp, and jvp of grad for forward-over-reverse
Hessian-vector products), and as a lighter chain for eager code on plain tensors, whose calls
enter the library with no operator dispatch in between. Everything that needs to see the
operators (torch.compile, dispatch modes, FakeTensors, vmap) still does.

A packed batch's (total, heads, head_dim) tensors enter the operators as their
(1, heads, total, head_dim) views .unsqueeze(0).transpose(1, 2), which the C API reads in place,
and its outputs are allocated in (total, heads, head_dim) memory, so the views back are contiguous.
attention_varlen() runs the same operators and autograd.Functions; vmap over its q, k, v folds the
mapped axis into the heads (the slices share the offsets, which cannot be mapped over).

The forward saves L (one float per row), never P. Tensors: (batch, heads, seq, head_dim) bf16 or
fp16 on a CUDA device, any strides (a layout the kernels cannot read is copied inside the
operator, which autograd never sees: the saved inputs are the caller's tensors); work goes on
the current stream.
"""

import torch

from .. import _capi, _checks
from . import _autograd, _launch, _ops  # noqa: F401 (_ops registers the operators)
from ._launch import DTYPES as _DTYPES, Config as _Config


# --- the user's entry point (traceable: checks only what torch.compile can see) ---------------

def _dtype_ok(dtype):
    return dtype in _DTYPES


def _check_operands(q, k, v, layout):
    """The shared checks (flashbob._checks) and what only torch has: tensor types and devices."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        # Cheapest reads first (each attribute costs a call into torch): t.is_cuda, not t.device.
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda:
            raise ValueError(f"{name} must be a CUDA tensor, got device {t.device}")
        _checks.tensor(t, name, layout, _dtype_ok)
    _checks.operands(q, k, v, layout)
    if not (q.get_device() == k.get_device() == v.get_device()):
        raise ValueError("q, k, v must be on the same device")


def _window(window_size, rows_q, rows_k, names=("seq_q", "seq_k")):
    if type(window_size) is tuple and window_size == (-1, -1):  # the default, the common case
        return -1, -1
    return _checks.window_fits(window_size, rows_q, rows_k, names)


# Calls of attention() already checked, by everything the checks read (types, shapes, dtypes,
# devices, the options), with their config and plan: a loop's later calls skip the checks. Only
# plain arguments are kept (tensors of type torch.Tensor, a bool, a float or None, ints), so that
# a hit is exactly a call the checks accepted.
_CHECKED = {}
_CHECKED_KEPT = 1024


def _checked_key(q, k, v, causal, scale, window_size):
    """The key of a call whose arguments are all plain, else None."""
    if (type(q) is torch.Tensor and type(k) is torch.Tensor and type(v) is torch.Tensor
            and type(causal) is bool and (scale is None or type(scale) is float)
            and type(window_size) is tuple and len(window_size) == 2
            and type(window_size[0]) is int and type(window_size[1]) is int):
        return (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.get_device(),
                k.get_device(), v.get_device(), causal, scale, window_size)
    return None


def attention(q, k, v, causal=False, scale=None, return_lse=False, window_size=(-1, -1)):
    """softmax(scale * q k^T) v with a causal mask if asked (bottom-right aligned when the
    sequence lengths differ); scale defaults to 1/sqrt(head_dim). Differentiable twice.

    q: (batch, heads, seq_q, head_dim); k, v: (batch, heads_kv, seq_k, head_dim), heads_kv a
    divisor of heads (grouped-query attention, 1 for multi-query; as SDPA's enable_gqa): query
    head h attends with key/value head h // (heads // heads_kv), and the gradients of k and v sum
    over each group inside the kernels, K and V never repeated. Tensors laid out (batch, seq,
    heads, head_dim), as flash-attn takes them, are passed as their .transpose(1, 2) views: the
    kernels read those strides directly, no copy, and O (like each gradient) comes back in its
    input's memory order when that input is dense, as SDPA's does. head_dim: 8 to 256; one that
    is no multiple of 16 runs zero-padded to the next multiple, exactly (the kernels pad a
    multiple of 8 themselves; any other head_dim is copied into padded memory inside the call).
    v's head_dim may differ from q's and k's (multi-head latent attention: 192 and 128): O is
    then (batch, heads, seq_q, v's head_dim), the scale still 1/sqrt(q's head_dim), and the call
    runs on zero-padded copies at the wider width.

    window_size: (left, right), flash-attn's sliding window: query i sees key j only if
    i + seq_k - seq_q - left <= j <= i + seq_k - seq_q + right; -1 leaves a side unbounded, and
    causal=True makes right 0 (so (-1, 0) is the causal mask). The kernels skip the blocks
    outside the window: the cost grows with seq_q x window.

    return_lse: also return L, the natural log-sum-exp of each query row of scale * q k^T
    (batch, heads, seq_q) float32, -inf for a row that sees no key; not differentiable."""
    key = None
    if not torch.compiler.is_compiling():
        key = _checked_key(q, k, v, causal, scale, window_size)
        checked = _CHECKED.get(key) if key is not None else None
        if checked is not None:
            return _autograd.attention(q, k, v, *checked, return_lse)
    scale = _checks.scale(scale)
    _check_operands(q, k, v, _checks.TORCH)
    left, right = _window(window_size, q.shape[2], k.shape[2])
    config = _Config(bool(causal), left, right, scale, None, None, 0, 0)
    plan = None
    if key is not None:
        plan = _launch.plan(q, k, v, config)
        if len(_CHECKED) >= _CHECKED_KEPT:
            _CHECKED.clear()
        _CHECKED[key] = (config, plan)
    return _autograd.attention(q, k, v, config, plan, return_lse)


def _check_offsets(cu_seqlens_q, cu_seqlens_k, q):
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of int32 offsets, got {type(t).__name__}")
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    _checks.offsets(cu_seqlens_q, cu_seqlens_k, lambda dtype: dtype == torch.int32)


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
    scale = _checks.scale(scale)
    _check_operands(q, k, v, _checks.PACKED)
    _check_offsets(cu_seqlens_q, cu_seqlens_k, q)
    _checks.packed_rows(q, k)
    max_seqlen_q = _checks.longest(max_seqlen_q, "max_seqlen_q", q.shape[0],
                                     lambda v: isinstance(v, torch.Tensor), (int, torch.SymInt))
    max_seqlen_k = _checks.longest(max_seqlen_k, "max_seqlen_k", k.shape[0],
                                     lambda v: isinstance(v, torch.Tensor), (int, torch.SymInt))
    left, right = _window(window_size, max_seqlen_q, max_seqlen_k, ("max_seqlen_q", "max_seqlen_k"))
    config = _Config(bool(causal), left, right, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k)
    # (1, heads, total, head_dim) views of the packed memory: the C API reads their strides.
    o, lse = _autograd.attention(q.unsqueeze(0).transpose(1, 2), k.unsqueeze(0).transpose(1, 2),
                                 v.unsqueeze(0).transpose(1, 2), config, None, True)
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
    scale = _checks.scale(scale)
    left, right = _checks.window(window_size)
    problem = _capi.Problem(batch, heads, seq_q, seq_k, head_dim, _DTYPES[dtype], int(bool(causal)),
                            scale,
                            heads if heads_kv is None else heads_kv,
                            int(left >= 0 or right >= 0), left, right)
    if varlen:
        # No size picks a kernel: the totals stand for the longest sequences (the C API checks
        # only sizes here, so no offsets are needed).
        problem.varlen = 1
        problem.max_seqlen_q, problem.max_seqlen_k = seq_q, seq_k
    with torch.cuda.device(device if device is not None else torch.cuda.current_device()):
        _capi.precompile_ops(problem, [_OPS[op] for op in ops])  # every kernel at once
