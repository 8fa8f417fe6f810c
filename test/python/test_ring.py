"""A whole context-parallel ring simulated in one process on one GPU (context parallelism): the sequence
cut into 2R zigzag chunks over R ranks, every rank's ring steps run in ring order through
flashbob.torch.ring (libflashbob's ring steps) and combined as docs/context-parallel.md says, shards
passed around by indexing instead of a transport. The assembled O, dQ, dK, dV and BoB's gQ, gK,
gV, gdO must match float64 autograd on the whole sequence within bf16's bound."""

import pytest

torch = pytest.importorskip("torch", reason="torch is installed only on the GPU machine")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashbob.torch.ring as ring  # noqa: E402

TOL = 5e-3  # relative L2 against float64, bf16 inputs


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def reference(q, k, v, do, uq, uk, uv, causal):
    """Float64 autograd on the whole sequence: O, L, the first backward, BoB's gradients."""
    q, k, v, do = (t.double().requires_grad_() for t in (q, k, v, do))
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1),
                                    float("-inf"))
    lse = scores.logsumexp(-1)
    o = torch.softmax(scores, -1) @ v
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, create_graph=True)
    inner = (dq * uq.double()).sum() + (dk * uk.double()).sum() + (dv * uv.double()).sum()
    gq, gk, gv, gdo = torch.autograd.grad(inner, (q, k, v, do))
    return dict(O=o, L=lse, dQ=dq, dK=dk, dV=dv, gQ=gq, gK=gk, gV=gv, gdO=gdo)


def simulate(q, k, v, do, uq, uk, uv, ranks, causal):
    """The ring's results, assembled in sequence order."""
    n = q.shape[2]
    size = n // (2 * ranks)
    cut = lambda t, c: t[:, :, c * size:(c + 1) * size]  # noqa: E731 (chunk c's rows)
    shards = ring.zigzag_chunks(ranks)

    def pairs(query_rank, key_rank):  # (query chunk, key chunk, diagonal)
        for i, j, diagonal in ring.chunk_pairs(ranks, query_rank, key_rank, causal):
            yield shards[query_rank][i], shards[key_rank][j], diagonal

    out = {name: {} for name in ("O", "L", "dQ", "dK", "dV", "gQ", "gdO", "gK", "gV", "c", "b")}
    # Forward, query-major: rank r holds its queries; at step t the keys of rank r - t arrive.
    for r in range(ranks):
        for qc in shards[r]:
            out["O"][qc] = torch.zeros(cut(q, qc).shape, device=q.device)
            out["L"][qc] = torch.full(cut(q, qc).shape[:3], float("-inf"), device=q.device)
        for t in range(ranks):
            for qc, kc, diagonal in pairs(r, (r - t) % ranks):
                o_t, l_t = ring.forward_step(cut(q, qc), cut(k, kc), cut(v, kc), causal=diagonal)
                out["O"][qc], out["L"][qc] = ring.merge_forward(out["O"][qc], out["L"][qc],
                                                                o_t, l_t)
    o16 = {c: o.to(q.dtype) for c, o in out["O"].items()}  # the forward's output, as stored
    # Backward, key-major: rank r holds its keys; at step t the queries of rank r + t arrive
    # (with their L and the dQ they have gathered so far).
    for r in range(ranks):
        for t in range(ranks):
            for qc, kc, diagonal in pairs((r + t) % ranks, r):
                dq, dk, dv, _ = ring.backward_step(cut(q, qc), cut(k, kc), cut(v, kc), o16[qc],
                                                   cut(do, qc), out["L"][qc], causal=diagonal)
                for name, chunk, part in (("dQ", qc, dq), ("dK", kc, dk), ("dV", kc, dv)):
                    out[name][chunk] = out[name].get(chunk, 0) + part
    # BoB pass 1, query-major, then its finish on the query's rank.
    for r in range(ranks):
        totals, d_rows = {}, {}
        for t in range(ranks):
            for qc, kc, diagonal in pairs(r, (r - t) % ranks):
                part, d_rows[qc] = ring.bob_pass1_step(
                    cut(q, qc), cut(k, kc), cut(v, kc), o16[qc], cut(do, qc), out["L"][qc],
                    cut(uq, qc), cut(uk, kc), cut(uv, kc), causal=diagonal)
                totals[qc] = ring.add_pass1(totals.get(qc), part)
        for qc, total in totals.items():
            out["gQ"][qc], out["gdO"][qc], out["c"][qc], out["b"][qc] = ring.finish_pass1(
                total, d_rows[qc], o16[qc])
            out.setdefault("D", {})[qc] = d_rows[qc]
    # BoB pass 2, key-major: the queries travel with their L, D, c, b.
    for r in range(ranks):
        for t in range(ranks):
            for qc, kc, diagonal in pairs((r + t) % ranks, r):
                gk, gv = ring.bob_pass2_step(
                    cut(q, qc), cut(k, kc), cut(v, kc), cut(do, qc), out["L"][qc],
                    out["D"][qc], out["c"][qc], out["b"][qc], cut(uq, qc), cut(uk, kc),
                    cut(uv, kc), causal=diagonal)
                out["gK"][kc] = out["gK"].get(kc, 0) + gk
                out["gV"][kc] = out["gV"].get(kc, 0) + gv
    return {name: torch.cat([parts[c] for c in range(2 * ranks)], dim=2)
            for name, parts in out.items() if name in ("O", "L", "dQ", "dK", "dV", "gQ", "gK",
                                                        "gV", "gdO")}


@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", [64, 128])
def test_simulated_ring_matches_float64_on_the_whole_sequence(ranks, causal, d):
    g = torch.Generator(device="cuda").manual_seed(31 + ranks + d)
    n = 2 * ranks * 96  # chunks of 96 rows: not a multiple of the kernels' blocks
    q, k, v, do, uq, uk, uv = (torch.randn(1, 2, n, d, device="cuda", generator=g)
                               .to(torch.bfloat16) for _ in range(7))
    got = simulate(q, k, v, do, uq, uk, uv, ranks, causal)
    want = reference(q, k, v, do, uq, uk, uv, causal)
    errors = {name: rel(got[name], want[name].detach()) for name in got}
    print(f"ring R={ranks} causal={causal} d={d}: " +
          " ".join(f"{name} {e:.2e}" for name, e in errors.items()))
    for name, e in errors.items():
        assert e <= TOL, (name, e)


def test_ring_steps_refuse_what_has_no_ring_form():
    q = torch.randn(1, 1, 64, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(ValueError, match="ring_step"):
        from flashbob import _capi
        problem = ring._ring_problem(q, q, False, None)
        out = torch.empty(1, 1, 64, 64, device="cuda")
        t = ring._tensor(q)
        _capi.forward_jvp(problem, t, t, t, ring._tensor(out), out.data_ptr(), t, t, t,
                          ring._tensor(out), ring._stream(q))
    assert ring.pair_mask(1, 0, True) == "full" and ring.pair_mask(1, 1, True) == "causal"
    assert ring.pair_mask(0, 1, True) is None and ring.pair_mask(0, 1, False) == "full"
    assert ring.zigzag_chunks(3) == [(0, 5), (1, 4), (2, 3)]
    # Rank 0 (chunks 0, 3) against rank 1's keys (chunks 1, 2), causal: only 3 sees 1 and 2.
    assert list(ring.chunk_pairs(2, 0, 1, True)) == [(1, 0, False), (1, 1, False)]
    assert list(ring.chunk_pairs(2, 1, 1, True)) == [(0, 0, True), (1, 0, False), (1, 1, True)]
