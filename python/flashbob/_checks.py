"""The argument checks flashbob.torch and flashbob.jax share, one wording for both (and without
importing either framework): the options, the operands' shapes and dtypes as the kernels need
them, a packed batch's offsets. What only the library knows (head dims, grid and sequence bounds)
it checks itself (flashbob_check_problem); what depends on the framework (tensor types, devices)
stays in each front end."""

import operator


class Layout:
    """Where the axes are in a front end's tensors: `text` as messages spell the layout, the
    axis of the heads, and (None when packed) of the batch."""

    def __init__(self, text, rank, heads, batch):
        self.text, self.rank, self.heads, self.batch = text, rank, heads, batch


TORCH = Layout("(batch, heads, seq, head_dim)", 4, 1, 0)
JAX = Layout("(batch, seq, heads, head_dim)", 4, 2, 0)
PACKED = Layout("(total, heads, head_dim)", 3, 1, None)  # both front ends


def tensor(t, name, layout, dtype_ok):
    """t's dtype (`dtype_ok(dtype)`: one the kernels take) and rank."""
    if not dtype_ok(t.dtype):
        raise TypeError(f"{name} must be bfloat16 or float16, got {t.dtype}")
    if len(t.shape) != layout.rank:
        raise ValueError(f"{name} must be {layout.text}, got shape {tuple(t.shape)}")


def operands(q, k, v, layout):
    """The shapes and dtypes of q, k, v (each already through tensor()) agree: k and v alike but
    for v's head_dim (which may differ from q's and k's: the problem's head_dim_v), the batch and
    head_dim q's, k's heads a divisor of q's (grouped-query attention), one dtype."""
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if ks[:-1] != vs[:-1]:
        raise ValueError(f"k and v must agree in all but head_dim, got {ks} and {vs}")
    if layout.batch is None:
        if qs[-1] != ks[-1]:
            raise ValueError(f"q {qs} and k {ks} differ in head_dim")
    elif qs[layout.batch] != ks[layout.batch] or qs[-1] != ks[-1]:
        raise ValueError(f"q {qs} and k {ks} differ in batch or head_dim")
    h = layout.heads
    if ks[h] == 0 or qs[h] % ks[h] != 0:
        raise ValueError(f"k's heads ({ks[h]}) must divide q's ({qs[h]}): grouped-query "
                         f"attention shares each key/value head among q.shape[{h}] // "
                         f"k.shape[{h}] query heads")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


def packed_rows(q, k):
    """A packed batch has at least one query row and one key row in all."""
    for t, name in ((q, "q"), (k, "k")):
        if t.shape[0] == 0:
            raise ValueError(f"{name} holds no rows: a packed batch needs at least one query row "
                             f"and one key row in all")


def offsets(cu_seqlens_q, cu_seqlens_k, is_int32):
    """The offsets' metadata (`is_int32(dtype)`); their contents are the C API's to check (it reads
    them back when the kernels run, and its errors name them)."""
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k")):
        if not is_int32(t.dtype):
            raise TypeError(f"{name} must be int32, got {t.dtype}")
        if len(t.shape) != 1:
            raise ValueError(f"{name} must be 1-D (batch + 1 offsets), got shape {tuple(t.shape)}")
    if cu_seqlens_q.shape[0] != cu_seqlens_k.shape[0]:
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have the same length (batch + 1), "
                         f"got {cu_seqlens_q.shape[0]} and {cu_seqlens_k.shape[0]}")
    if cu_seqlens_q.shape[0] < 2:
        raise ValueError(f"cu_seqlens_q must hold batch + 1 >= 2 offsets, got "
                         f"{cu_seqlens_q.shape[0]}")


def scale(value):
    """The softmax scale as the C problem takes it: 0.0 stands for the default 1/sqrt(head_dim)."""
    if value is None:
        return 0.0
    if not (value > 0):
        raise ValueError(f"scale must be positive, got {value}")
    return float(value)


def window(window_size):
    """flash-attn's window_size as (left, right); -1 leaves a side unbounded."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"window_size must be a pair (left, right), got {window_size!r}") from None
    for side, name in ((left, "left"), (right, "right")):
        if not isinstance(side, int) or isinstance(side, bool) or side < -1:
            raise ValueError(f"window_size's {name} side must be an int >= -1 (-1: unbounded), "
                             f"got {side!r}")
    return left, right


def window_fits(window_size, rows_q, rows_k, names=("seq_q", "seq_k")):
    """window() of window_size, each side at most the longer sequence (rows_q, rows_k: the
    sequences' rows, or the longest sequence's of a packed batch, named by `names`)."""
    left, right = window(window_size)
    longest_rows = max(rows_q, rows_k)
    for side, name in ((left, "left"), (right, "right")):
        if side > longest_rows:
            raise ValueError(f"window_size's {name} side ({side}) is larger than the sequences "
                             f"({names[0]} {rows_q}, {names[1]} {rows_k}): pass -1 for no bound")
    return left, right


def longest(value, name, total, is_array, ints=(int,)):
    """max_seqlen as the kernels take it: a positive int, at most the side's total rows.
    `is_array(value)` tells the framework's arrays, refused (the bound is static, fixed when the
    call is built); values of `ints` are taken as they are (torch.SymInt under torch.compile),
    others through operator.index (numpy integers)."""
    if isinstance(value, bool) or is_array(value):
        raise TypeError(f"{name} must be an int (the longest sequence's rows), got "
                        f"{type(value).__name__}")
    if not isinstance(value, ints):
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"{name} must be an int (the longest sequence's rows), got "
                            f"{type(value).__name__}") from None
    if value < 1:
        raise ValueError(f"{name} must be positive (the longest sequence's rows), got {value}")
    # flash-attn takes any bound; the grid covers max_seqlen rows a sequence, never more than all.
    return min(value, total)
