"""The attention options flashbob.torch and flashbob.jax both take, checked the same way (and
without importing either framework)."""


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
