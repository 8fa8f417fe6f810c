"""FlashBoB: exact attention forward, backward and backward-over-backward (BoB), JIT compiled.

`flashbob.torch.attention(q, k, v, causal=False, scale=None)` is scaled dot-product attention
whose backward is itself differentiable (its backward runs BoB), so grad-of-grad, Hessian-vector
products and meta-learning through attention work with O(N) extra memory.
"""

from ._capi import version, FlashBobError  # noqa: F401

__all__ = ["version", "FlashBobError"]
