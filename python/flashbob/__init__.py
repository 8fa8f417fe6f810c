"""FlashBoB: exact attention forward, backward and backward-over-backward (BoB), JIT compiled.

`flashbob.torch.attention(q, k, v, causal=False, scale=None)` is scaled dot-product attention
whose backward is itself differentiable (its backward runs BoB), so grad-of-grad, Hessian-vector
products and meta-learning through attention work with O(N) extra memory.
`flashbob.torch.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)`
is the same for a packed batch of variable-length sequences (flash-attn's varlen layout).

Importing needs neither a GPU nor torch; libflashbob.so is loaded on the first call, which raises
NoDriverError where there is no GPU driver and FlashBobError where the library is missing.
"""

from ._capi import version, library_path, FlashBobError, NoDriverError  # noqa: F401

__all__ = ["version", "library_path", "FlashBobError", "NoDriverError"]
