"""Context-parallel (ring) attention on one rank, with PyTorch tensors: libflashbob's ring steps
(`flashbob_problem.ring_step`), each on one pair of shards (a query chunk and a key chunk), and
the elementwise parts that combine the steps' partial results over a ring. The math, what
travels and why it is exact: docs/context-parallel.md. A transport (torch.distributed) moves the
shards between ranks; these functions are what each rank computes.

Tensors are (batch, heads, rows, head_dim) in bf16 or fp16 on a CUDA device; L and the row
scalars D, c, b, beta are (batch, heads, rows) float32 and are the whole sequence's (the forward
ring's L, BoB pass 1's c and b), never a shard's own. A pair's mask is `causal` on a diagonal pair
(a chunk with itself) and none where every key comes first; a pair whose keys all come later is
not computed at all. Partial results are float32.

    steps                                   combined by
    forward_step -> (O_t, L_t)              merge_forward over key chunks
    backward_step -> (dQ_t, dK_t, dV_t, D)  sums: dQ over key chunks, dK and dV over query chunks
    bob_pass1_step -> Pass1 partial         add_pass1 over key chunks, then finish_pass1
    bob_pass2_step -> (gK_t, gV_t)          sums over query chunks
"""

from typing import NamedTuple

import torch

from .. import _capi
from ._launch import DENSE, problem as _problem, readable as _readable, stream as _stream
from ._launch import tensor as _tensor


def _ring_problem(q, k, causal, scale):
    problem = _problem(q, k, DENSE._replace(causal=causal,
                                            scale=0.0 if scale is None else float(scale)))
    problem.ring_step = 1
    return problem


def _partial(t):
    """A float32 output shaped like `t`."""
    return torch.empty(t.shape, device=t.device, dtype=torch.float32)


def _row_vector(t):
    b, h, n, _ = t.shape
    return t.new_empty((b, h, n), dtype=torch.float32)


def _inputs(*tensors):
    return [_readable(t) for t in tensors]


def forward_step(q, k, v, causal=False, scale=None):
    """(O_t, L_t): the attention of the query chunk over this key chunk alone, O_t float32."""
    q, k, v = _inputs(q, k, v)
    o, lse = _partial(q), _row_vector(q)
    with torch.cuda.device(q.device):
        _capi.forward(_ring_problem(q, k, causal, scale), _tensor(q), _tensor(k), _tensor(v),
                      _tensor(o), lse.data_ptr(), _stream(q))
    return o, lse


def merge_forward(o, lse, o_t, lse_t):
    """The merge of two forward partials over disjoint keys (log-sum-exp weights); a part with
    L = -inf (no visible key) adds nothing. Returns float32 (O, L)."""
    merged = torch.logaddexp(lse, lse_t)
    # exp(-inf - -inf) would be nan: a row no part has seen stays 0 with L = -inf.
    safe = torch.where(torch.isinf(merged), torch.zeros_like(merged), merged)
    w, w_t = torch.exp(lse - safe), torch.exp(lse_t - safe)
    return o * w.unsqueeze(-1) + o_t * w_t.unsqueeze(-1), merged


def backward_step(q, k, v, o, do, lse, causal=False, scale=None):
    """(dQ_t, dK_t, dV_t, D): the pair's share of the first backward, float32, from the whole
    sequence's O and L of the query chunk (D = rowsum(dO o O) comes back as well)."""
    q, k, v, o, do = _inputs(q, k, v, o, do)
    lse = lse.contiguous()  # held until the launch is queued
    dq, dk, dv, d_row = _partial(q), _partial(k), _partial(v), _row_vector(q)
    with torch.cuda.device(q.device):
        _capi.backward(_ring_problem(q, k, causal, scale), _tensor(q), _tensor(k), _tensor(v),
                       _tensor(o), _tensor(do), lse.data_ptr(), _tensor(dq),
                       _tensor(dk), _tensor(dv), d_row.data_ptr(), _stream(q))
    return dq, dk, dv, d_row


class Pass1(NamedTuple):
    """BoB pass 1's partial sums for a query chunk (X1..X4 float32 like Q; c and beta rows)."""
    x1: torch.Tensor
    x2: torch.Tensor
    x3: torch.Tensor
    x4: torch.Tensor
    c: torch.Tensor
    beta: torch.Tensor


def bob_pass1_step(q, k, v, o, do, lse, uq, uk, uv, causal=False, scale=None):
    """(Pass1 partial, D) of BoB's first pass over this key chunk."""
    q, k, v, o, do, uq, uk, uv = _inputs(q, k, v, o, do, uq, uk, uv)
    lse = lse.contiguous()
    x = [_partial(q) for _ in range(4)]
    b, h, n, _ = q.shape
    rows = q.new_empty((3, b, h, n), dtype=torch.float32)  # D, c, beta
    with torch.cuda.device(q.device):
        _capi.bob_pass1(_ring_problem(q, k, causal, scale), _tensor(q), _tensor(k), _tensor(v),
                        _tensor(o), _tensor(do), lse.data_ptr(), _tensor(uq),
                        _tensor(uk), _tensor(uv), *(_tensor(t) for t in x), rows.data_ptr(),
                        _stream(q))
    return Pass1(*x, rows[1], rows[2]), rows[0]


def add_pass1(total, part):
    """Pass 1's partials summed over key chunks (total None: the first)."""
    return part if total is None else Pass1(*(a + b for a, b in zip(total, part)))


def finish_pass1(total, d_row, o, scale=None):
    """(gQ, gdO, c, b) of a query chunk from its pass 1 totals: b = sum beta - c o D,
    gQ = s (X1 - c o X2 - b o X3), gdO = X4 - c o O, with s the softmax scale (None:
    1/sqrt(head_dim)); float32."""
    if scale is None:
        scale = o.shape[-1] ** -0.5
    c = total.c
    b = total.beta - c * d_row
    gq = scale * (total.x1 - c.unsqueeze(-1) * total.x2 - b.unsqueeze(-1) * total.x3)
    gdo = total.x4 - c.unsqueeze(-1) * o.float()
    return gq, gdo, c, b


def bob_pass2_step(q, k, v, do, lse, d_row, c, b, uq, uk, uv, causal=False, scale=None):
    """(gK_t, gV_t): BoB's key-side gradients over this query chunk, float32, from the query
    chunk's whole-sequence L, D, c and b."""
    q, k, v, do, uq, uk, uv = _inputs(q, k, v, do, uq, uk, uv)
    lse = lse.contiguous()
    gk, gv = _partial(k), _partial(v)
    rows = torch.stack([d_row, c, b]).contiguous()
    with torch.cuda.device(q.device):
        _capi.bob_pass2(_ring_problem(q, k, causal, scale), _tensor(q), _tensor(k), _tensor(v),
                        _tensor(do), lse.data_ptr(), rows.data_ptr(), _tensor(uq),
                        _tensor(uk), _tensor(uv), _tensor(gk), _tensor(gv), _stream(q))
    return gk, gv


def zigzag_chunks(ranks):
    """The chunks of each rank under the zigzag layout: the sequence cut into 2R chunks, rank r
    holding chunks r and 2R - 1 - r, which balances causal work over ranks and ring steps."""
    return [(r, 2 * ranks - 1 - r) for r in range(ranks)]


def zigzag_shard(x, ranks, rank, dim=2):
    """Rank `rank`'s rows of the whole-sequence `x` under the zigzag layout (chunks rank and
    2 ranks - 1 - rank of 2 ranks, concatenated); dim's length a multiple of 2 ranks."""
    chunks = x.chunk(2 * ranks, dim=dim)
    first, second = zigzag_chunks(ranks)[rank]
    return torch.cat([chunks[first], chunks[second]], dim=dim)


def pair_mask(query_chunk, key_chunk, causal):
    """How a causal ring treats a pair of chunks: "full" (every key earlier, or no mask),
    "causal" (a chunk with itself: the square triangle) or None (every key later: skipped)."""
    if not causal or key_chunk < query_chunk:
        return "full"
    return "causal" if key_chunk == query_chunk else None


def chunk_pairs(ranks, query_rank, key_rank, causal):
    """The chunk pairs of a zigzag ring's step in which `query_rank`'s queries meet
    `key_rank`'s keys, as (i, j, diagonal): i and j index the two shards' chunks (0 or 1),
    diagonal whether the pair runs with the causal mask. Masked-out pairs are left out."""
    chunks = zigzag_chunks(ranks)
    for i, qc in enumerate(chunks[query_rank]):
        for j, kc in enumerate(chunks[key_rank]):
            mask = pair_mask(qc, kc, causal)
            if mask is not None:
                yield i, j, mask == "causal"
