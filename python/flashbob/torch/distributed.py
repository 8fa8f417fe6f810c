"""Context-parallel attention over a torch.distributed group (ring attention), differentiable
twice: each rank holds a shard of the sequence, the shards of keys (for the forward and BoB's
first pass) or of queries (for the backward and BoB's second pass) go round the ring, and each
rank runs libflashbob's ring steps on the pairs it meets (flashbob.torch.ring). The math and what
travels: docs/context-parallel.md.

    local = shard(x, group)            # this rank's rows of a (batch, heads, seq, head_dim) x
    o = attention(local_q, local_k, local_v, group=group, causal=True)
    full = unshard(o, group)           # every rank's rows, in sequence order

The layout is zigzag: the sequence cut into 2R chunks (R ranks), rank r holding chunks r and
2R - 1 - r, which balances a causal mask's work over ranks and steps; the sequence length must be
a multiple of 2R. Queries and keys are the same positions (self-attention), K and V may have fewer
heads (grouped-query attention). Transfers use torch.distributed's point-to-point operations
(NCCL between GPUs; a gloo group stages them through host memory), the next step's shard sent
while this step computes. Results do not depend on timing: every sum runs in the ring's step
order.
"""

import torch
import torch.distributed as dist

from . import ring

__all__ = ["attention", "shard", "unshard"]


# --- layout ------------------------------------------------------------------------------------

def _world(group):
    return dist.get_world_size(group), dist.get_rank(group)


def shard(x, group=None, dim=2):
    """This rank's rows of the whole-sequence tensor `x` (zigzag: chunks r and 2R - 1 - r)."""
    ranks, rank = _world(group)
    n = x.shape[dim]
    if n % (2 * ranks):
        raise ValueError(f"the sequence ({n} rows) must be a multiple of 2 x ranks = {2 * ranks}")
    return ring.zigzag_shard(x, ranks, rank, dim)


def unshard(local, group=None, dim=2):
    """The whole sequence from every rank's shard (an all-gather), in sequence order."""
    ranks, _ = _world(group)
    comm = _Comm(group)
    staged = local.contiguous()
    if comm.cpu:  # gloo gathers host tensors, and not every dtype: float32 holds these exactly
        if staged.dtype in (torch.bfloat16, torch.float16):
            staged = staged.float()
        staged = staged.cpu()
    gathered = [torch.empty_like(staged) for _ in range(ranks)]
    dist.all_gather(gathered, staged, group=group)
    chunks = [None] * (2 * ranks)
    for r, part in enumerate(gathered):
        a, b = part.to(local.device, local.dtype).chunk(2, dim=dim)
        first, second = ring.zigzag_chunks(ranks)[r]
        chunks[first], chunks[second] = a, b
    return torch.cat(chunks, dim=dim)


# --- transport ---------------------------------------------------------------------------------

class _Comm:
    """Point-to-point transfers to the ring's neighbours, started before a step's compute and
    finished after it."""

    def __init__(self, group):
        self.group = group
        self.size, self.rank = _world(group)
        self.cpu = dist.get_backend(group) == dist.Backend.GLOO  # gloo sends host tensors

    def keys_at(self, step):
        """Whose key shard this rank holds at `step` of a query-major ring (keys travel on)."""
        return (self.rank - step) % self.size

    def queries_at(self, step):
        """Whose query shard this rank holds at `step` of a key-major ring (queries travel back)."""
        return (self.rank + step) % self.size

    def _global(self, r):
        r %= self.size
        return r if self.group is None else dist.get_global_rank(self.group, r)

    def start(self, tensors, to, source):
        sends = [t.contiguous() for t in tensors]
        device = sends[0].device
        if self.cpu:
            sends = [t.cpu() for t in sends]
        receives = [torch.empty_like(t) for t in sends]
        ops = [dist.P2POp(dist.isend, t, self._global(to), self.group) for t in sends]
        ops += [dist.P2POp(dist.irecv, t, self._global(source), self.group) for t in receives]
        return dist.batch_isend_irecv(ops), receives, sends, device

    def finish(self, pending):
        requests, receives, _sends, device = pending  # the sends live until their requests end
        for request in requests:
            request.wait()
        return [t.to(device) for t in receives] if self.cpu else receives


def _halves(t):
    """A shard's two chunks (views)."""
    return t.chunk(2, dim=2)


def _zeros(like):
    """Float32 zeros for each of a shard's two chunks."""
    return [torch.zeros(h.shape, device=h.device, dtype=torch.float32) for h in _halves(like)]


# --- the rings ---------------------------------------------------------------------------------

def _forward(q, k, v, causal, scale, comm):
    """Query-major: keys travel forward (rank r holds key shard r - t at step t)."""
    qs = _halves(q)
    o = _zeros(q)
    lse = [torch.full(h.shape[:3], float("-inf"), device=q.device) for h in qs]
    keys = [k, v]
    for t in range(comm.size):
        pending = comm.start(keys, comm.rank + 1, comm.rank - 1) if t < comm.size - 1 else None
        ks, vs = _halves(keys[0]), _halves(keys[1])
        for i, j, diagonal in ring.chunk_pairs(comm.size, comm.rank, comm.keys_at(t), causal):
            o_t, l_t = ring.forward_step(qs[i], ks[j], vs[j], causal=diagonal, scale=scale)
            o[i], lse[i] = ring.merge_forward(o[i], lse[i], o_t, l_t)
        if pending:
            keys = comm.finish(pending)
    return torch.cat(o, dim=2).to(q.dtype), torch.cat(lse, dim=2)


def _backward(q, k, v, o, lse, do, causal, scale, comm):
    """Key-major: queries travel backward with their O, dO and L (rank r holds query shard r + t
    at step t). The dQ a shard has gathered follows it one hop behind: sent after a step, it is
    added to the next holder's own partials once they are computed, so the hop overlaps that
    compute; after the last step it makes one more hop home."""
    ks, vs = _halves(k), _halves(v)
    dk, dv = _zeros(k), _zeros(v)
    queries = [q, o, do, lse]
    dq_hop = None  # the dQ of the query shard held next, on its way
    for t in range(comm.size):
        pending = comm.start(queries, comm.rank - 1, comm.rank + 1) if t < comm.size - 1 else None
        qs, os, dos = (_halves(x) for x in queries[:3])
        ls = queries[3].chunk(2, dim=2)
        dq = _zeros(q)
        for i, j, diagonal in ring.chunk_pairs(comm.size, comm.queries_at(t), comm.rank, causal):
            dq_t, dk_t, dv_t, _ = ring.backward_step(qs[i], ks[j], vs[j], os[i], dos[i], ls[i],
                                                     causal=diagonal, scale=scale)
            dq[i] = dq[i] + dq_t
            dk[j] = dk[j] + dk_t
            dv[j] = dv[j] + dv_t
        dq = torch.cat(dq, dim=2)
        if dq_hop is not None:
            dq = comm.finish(dq_hop)[0] + dq  # the earlier holders' sum first: a fixed order
        if comm.size > 1:
            dq_hop = comm.start([dq], comm.rank - 1, comm.rank + 1)
        if pending:
            queries = comm.finish(pending)
    if dq_hop is not None:
        dq = comm.finish(dq_hop)[0]  # this rank's own queries' dQ, home
    cat = lambda parts, like: torch.cat(parts, dim=2).to(like.dtype)  # noqa: E731
    return dq.to(q.dtype), cat(dk, k), cat(dv, v)


def _bob(q, k, v, o, lse, do, uq, uk, uv, causal, scale, comm):
    """BoB's first pass query-major (keys travel with their cotangents), its finish on each
    rank, then the second pass key-major (queries travel with L and the finished D, c, b)."""
    qs, os, dos, uqs, ls = (*(_halves(x) for x in (q, o, do, uq)), lse.chunk(2, dim=2))
    totals, d_rows = [None, None], [None, None]
    keys = [k, v, uk, uv]
    for t in range(comm.size):
        pending = comm.start(keys, comm.rank + 1, comm.rank - 1) if t < comm.size - 1 else None
        ks, vs, uks, uvs = (_halves(x) for x in keys)
        for i, j, diagonal in ring.chunk_pairs(comm.size, comm.rank, comm.keys_at(t), causal):
            part, d_rows[i] = ring.bob_pass1_step(qs[i], ks[j], vs[j], os[i], dos[i], ls[i],
                                                  uqs[i], uks[j], uvs[j], causal=diagonal,
                                                  scale=scale)
            totals[i] = ring.add_pass1(totals[i], part)
        if pending:
            keys = comm.finish(pending)
    finished = [ring.finish_pass1(totals[i], d_rows[i], os[i], scale) for i in range(2)]
    gq = torch.cat([f[0] for f in finished], dim=2).to(q.dtype)
    gdo = torch.cat([f[1] for f in finished], dim=2).to(do.dtype)
    rows = torch.stack([torch.cat(d_rows, dim=2), torch.cat([f[2] for f in finished], dim=2),
                        torch.cat([f[3] for f in finished], dim=2)])  # D, c, b

    ks, vs, uks, uvs = (_halves(x) for x in (k, v, uk, uv))
    gk, gv = _zeros(k), _zeros(v)
    queries = [q, do, uq, lse, rows]
    for t in range(comm.size):
        pending = comm.start(queries, comm.rank - 1, comm.rank + 1) if t < comm.size - 1 else None
        qs, dos, uqs = (_halves(x) for x in queries[:3])
        ls = queries[3].chunk(2, dim=2)
        ds, cs, bs = (r.chunk(2, dim=2) for r in queries[4])
        for i, j, diagonal in ring.chunk_pairs(comm.size, comm.queries_at(t), comm.rank, causal):
            gk_t, gv_t = ring.bob_pass2_step(qs[i], ks[j], vs[j], dos[i], ls[i], ds[i], cs[i],
                                             bs[i], uqs[i], uks[j], uvs[j], causal=diagonal,
                                             scale=scale)
            gk[j] = gk[j] + gk_t
            gv[j] = gv[j] + gv_t
        if pending:
            queries = comm.finish(pending)
    return gq, torch.cat(gk, dim=2).to(k.dtype), torch.cat(gv, dim=2).to(v.dtype), gdo


# --- autograd ----------------------------------------------------------------------------------

class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, group):
        o, lse = _forward(q, k, v, causal, scale, _Comm(group))
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.options = (causal, scale, group)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        # O without its edge to this node: BoB's gradients contain what flows through it.
        dq, dk, dv = _RingBackward.apply(q, k, v, o.detach(), lse, do.to(q.dtype), *ctx.options)
        return dq, dk, dv, None, None, None


class _RingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, o, lse, do, causal, scale, group):
        ctx.save_for_backward(q, k, v, o, lse, do)
        ctx.options = (causal, scale, group)
        return _backward(q, k, v, o, lse, do, causal, scale, _Comm(group))

    @staticmethod
    def backward(ctx, uq, uk, uv):
        q, k, v, o, lse, do = ctx.saved_tensors
        causal, scale, group = ctx.options
        u = [torch.zeros_like(x) if g is None else g.to(x.dtype)
             for g, x in ((uq, q), (uk, k), (uv, v))]
        gq, gk, gv, gdo = _bob(q, k, v, o, lse, do, *u, causal, scale, _Comm(group))
        return gq, gk, gv, None, None, gdo, None, None, None


def attention(q, k, v, group=None, causal=False, scale=None):
    """Attention over the whole sequence, computed from this rank's shards (see shard()):
    q (batch, heads, n, head_dim), k and v (batch, heads_kv, n, head_dim), n = N / R rows in
    bf16 or fp16 on this rank's GPU, the same n on every rank of `group` (None: the default
    group). Returns this rank's rows of O. Differentiable: the backward and its own backward
    (BoB, for Hessian-vector products) run as rings too."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor) or t.device.type != "cuda" or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-d CUDA tensor (batch, heads, rows, head_dim)")
    if q.shape[2] != k.shape[2] or k.shape != v.shape:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: a shard "
                         "holds the same rows of queries and keys, k and v alike")
    if q.shape[2] % 2:
        raise ValueError(f"a shard's {q.shape[2]} rows must be two chunks of equal length")
    return _RingAttention.apply(q, k, v, bool(causal), scale, group)
