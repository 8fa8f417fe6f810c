"""Meta-learning through attention: one inner SGD step on the projections, then the outer
gradient through that step. The outer gradient differentiates the attention backward, which is
what flashbob's BoB kernels compute in O(N) memory.

    python3 python/examples/meta_learning.py --seq 65536 --heads 8 --head-dim 64 [--torch]

With --torch it also tries PyTorch's own math attention (materializes N x N) and reports
whether it ran out of memory.
"""

import argparse
import time

import torch

import flashbob.torch as fb


def reference_attention(q, k, v, causal=False, scale=None, window_size=(-1, -1)):
    """Plain softmax attention (what autograd can differentiate twice). Fewer key/value heads
    than query heads (grouped-query attention) are repeated to match, so autograd sums their
    gradients over each group. window_size (left, right) as flash-attn's; a row that sees no
    key gives 0."""
    if k.shape[-3] != q.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = scale * q @ k.transpose(-1, -2)
    left, right = window_size
    right = 0 if causal else right
    if left < 0 and right < 0:
        return torch.softmax(s, dim=-1) @ v
    n, m = s.shape[-2:]
    # key - query - (M - N): where each key lies from the query's own (bottom-right diagonal)
    offset = (torch.arange(m, device=s.device)[None, :] - torch.arange(n, device=s.device)[:, None]
              - (m - n))
    keep = torch.ones(n, m, dtype=torch.bool, device=s.device)
    if right >= 0:
        keep &= offset <= right
    if left >= 0:
        keep &= offset >= -left
    seen = keep.any(dim=-1, keepdim=True)
    s = s.masked_fill(~keep, float("-inf")).masked_fill(~seen, 0.0)
    return (torch.softmax(s, dim=-1) * seen) @ v


def outer_gradient(attention, x_train, y_train, x_val, y_val, weights, lr=0.1, causal=True):
    """d/dW of the validation loss after one SGD step on the training loss."""
    def loss(w, x, y):
        wq, wk, wv = w
        o = attention(x @ wq, x @ wk, x @ wv, causal=causal)
        return (o.float() - y.float()).square().mean()

    inner = loss(weights, x_train, y_train)
    grads = torch.autograd.grad(inner, weights, create_graph=True)
    adapted = [w - lr * g for w, g in zip(weights, grads)]
    outer = loss(adapted, x_val, y_val)
    return torch.autograd.grad(outer, weights), outer.detach()


def make_problem(batch, heads, seq, d, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    def r(*shape, s=1.0):
        return (torch.randn(*shape, device="cuda", generator=g) * s).to(dtype)
    x_train, y_train = r(batch, heads, seq, d), r(batch, heads, seq, d)
    x_val, y_val = r(batch, heads, seq, d), r(batch, heads, seq, d)
    weights = [r(d, d, s=d ** -0.5).requires_grad_() for _ in range(3)]
    return x_train, y_train, x_val, y_val, weights


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=65536)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--torch", action="store_true", help="also try PyTorch's math attention")
    args = ap.parse_args()
    problem = make_problem(1, args.heads, args.seq, args.head_dim, torch.bfloat16)

    torch.cuda.reset_peak_memory_stats()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    grads, outer = outer_gradient(fb.attention, *problem)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30
    finite = all(torch.isfinite(g).all().item() for g in grads)
    print(f"flashbob: N={args.seq} heads={args.heads} d={args.head_dim} bf16 causal: outer loss "
          f"{outer.item():.6f}, |dW| {[round(g.float().norm().item(), 6) for g in grads]}, "
          f"finite {finite}, {dt:.2f} s (first call includes JIT), peak {peak:.2f} GiB")
    if args.torch:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            grads_ref, _ = outer_gradient(reference_attention, *problem)
            torch.cuda.synchronize()
            print(f"pytorch math attention: ran, peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
        except torch.OutOfMemoryError as e:
            print("pytorch math attention: out of memory:", str(e).splitlines()[0])


if __name__ == "__main__":
    main()
