"""The attention options flashbob.torch and flashbob.jax both take, checked the same way (and
without importing either framework)."""

import operator


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
