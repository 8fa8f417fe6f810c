"""Context-parallel BoB against one GPU: the time of BoB (both passes, given the
forward's O and L) on the whole sequence with the one-GPU op, and on R ranks with
flashbob.torch.distributed's rings; the scaling is the one-GPU time over the slowest rank's.

    python3 bench/ring_scaling.py --modes single,simulate --ranks 2 --n 1048576 --heads 16 --d 128 --causal
    NCCL_NVLS_ENABLE=0 python3 bench/ring_scaling.py --modes single,ring --ranks 2 ...   # R GPUs

Modes:
  single    the one-GPU op (flashbob.torch's BoB) on the whole sequence.
  simulate  one GPU: each rank's whole ring (the same steps, chunk pairs and merges) in turn, the
            transport left out (a step computes on the shards it would send, which have the
            shapes of those it would receive; the kernels' time does not depend on values). Its
            slowest rank bounds R GPUs' time from below: the scaling R GPUs can reach when
            every transfer hides behind a step's compute.
  ring      R processes, one GPU each, NCCL: the real rings, transfers overlapped
            (--backend gloo: every rank on GPU 0, transfers through host memory; a check of
            this tool's ring path, not a measurement).
Every mode also reports the bytes one rank sends per ring step and, for the rings, the link
bandwidth that would hide them (bytes per step / compute time per step).

Each measurement is one run after a warm-up on the first head alone (which compiles the same
kernels), timed with the device synchronized on both sides; one JSON line each, then a summary.
"""

import argparse
import json
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import flashbob.torch as fb
from flashbob.torch import distributed as fd


def inputs(n, heads, d, device, seed=11):
    """q, k, v, do, uq, uk, uv: bf16 (1, heads, n, d), the same on every rank."""
    g = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(1, heads, n, d, device=device, generator=g, dtype=torch.bfloat16)
            for _ in range(7)]


def timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, out


def first_head(tensors):
    return [t[:, :1].contiguous() for t in tensors]


def bob_flops(n, heads, d, causal):
    """docs/bob-math.md: 36 N M d per head, half of it under a causal mask."""
    return (18 if causal else 36) * n * n * d * heads


# --- one GPU -----------------------------------------------------------------------------------

def single(args):
    q, k, v, do, uq, uk, uv = inputs(args.n, args.heads, args.d, "cuda")
    o, lse = fb.attention(q, k, v, causal=args.causal, return_lse=True)
    config = (args.causal, -1, -1, 0.0, None, None, 0, 0)

    def run(ts):
        return fb._ops._bob_body(*ts, *config)

    run(first_head([q, k, v, o]) + [lse[:, :1].contiguous()] + first_head([do, uq, uk, uv]))
    seconds, _ = timed(lambda: run([q, k, v, o, lse, do, uq, uk, uv]))
    return {"mode": "single", "seconds": seconds,
            "tflops": bob_flops(args.n, args.heads, args.d, args.causal) / seconds / 1e12}


# --- one GPU, each rank in turn ----------------------------------------------------------------

class _LocalComm(fd._Comm):
    """Rank `rank` of an R-rank ring with the transport left out: a transfer hands back what it
    was given; the bytes each one would send are counted."""

    def __init__(self, ranks, rank):  # not _Comm.__init__: that one asks a process group
        self.size, self.rank, self.group, self.cpu = ranks, rank, None, False
        self.sent = []

    def start(self, tensors, to, source):
        self.sent.append(sum(t.numel() * t.element_size() for t in tensors))
        return tensors

    def finish(self, pending):
        return pending


def _rank_shards(tensors, ranks, rank):
    """Rank `rank`'s zigzag shard of each whole-sequence tensor (rows on dim 2)."""
    return [fd.ring.zigzag_shard(t, ranks, rank) for t in tensors]


def _ring_bob(shards, causal, comm):
    q, k, v, o, lse, do, uq, uk, uv = shards
    return fd._bob(q, k, v, o, lse, do, uq, uk, uv, causal, None, comm)


def simulate(args):
    q, k, v, do, uq, uk, uv = inputs(args.n, args.heads, args.d, "cuda")
    o, lse = fb.attention(q, k, v, causal=args.causal, return_lse=True)
    whole = [q, k, v, o, lse, do, uq, uk, uv]
    warm = [t[:, :1].contiguous() for t in whole]
    ranks = []
    for rank in range(args.ranks):
        _ring_bob(_rank_shards(warm, args.ranks, rank), args.causal, _LocalComm(args.ranks, rank))
        shards = _rank_shards(whole, args.ranks, rank)
        comm = _LocalComm(args.ranks, rank)
        seconds, _ = timed(lambda: _ring_bob(shards, args.causal, comm))
        del shards
        ranks.append({"rank": rank, "seconds": seconds, "bytes_per_step": comm.sent})
    return {"mode": "simulate", "ranks": ranks, **_ring_summary(args, ranks)}


def _ring_summary(args, ranks):
    """The slowest rank, and the link bandwidth that hides each step's transfer: BoB's two rings
    take R steps each, so a step computes for about a rank's time / 2R."""
    slowest = max(r["seconds"] for r in ranks)
    step_seconds = slowest / (2 * args.ranks)
    largest = max(max(r["bytes_per_step"], default=0) for r in ranks)
    return {"seconds": slowest, "step_seconds": step_seconds, "largest_step_bytes": largest,
            "hiding_bandwidth_gb_s": largest / step_seconds / 1e9,
            "tflops": bob_flops(args.n, args.heads, args.d, args.causal) / slowest / 1e12}


# --- R processes ------------------------------------------------------------------------------

class _CountingComm(fd._Comm):
    def __init__(self, group):
        super().__init__(group)
        self.sent = []

    def start(self, tensors, to, source):
        self.sent.append(sum(t.numel() * t.element_size() for t in tensors))
        return super().start(tensors, to, source)


def _ring_worker(rank, args, init, out):
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # the GPU machine requires it: never NVLink multicast
    device = torch.device("cuda", rank if args.backend == "nccl" else 0)
    torch.cuda.set_device(device)
    dist.init_process_group(args.backend, init_method=f"file://{init}", rank=rank,
                            world_size=args.ranks)
    try:
        q, k, v, do, uq, uk, uv = (fd.shard(t) for t in inputs(args.n, args.heads, args.d, "cuda"))
        comm = _CountingComm(None)
        forward_seconds, (o, lse) = timed(lambda: fd._forward(q, k, v, args.causal, None, comm))
        shards = [q, k, v, o, lse, do, uq, uk, uv]
        _ring_bob([t[:, :1].contiguous() for t in shards], args.causal, _CountingComm(None))
        dist.barrier()
        comm = _CountingComm(None)
        seconds, _ = timed(lambda: _ring_bob(shards, args.causal, comm))
        record = {"rank": rank, "seconds": seconds, "bytes_per_step": comm.sent,
                  "forward_seconds": forward_seconds}
        gathered = [None] * args.ranks
        dist.all_gather_object(gathered, record)
        if rank == 0:
            with open(out, "w") as f:
                json.dump(gathered, f)
    finally:
        dist.destroy_process_group()


def ring(args):
    if args.backend == "nccl" and torch.cuda.device_count() < args.ranks:
        raise SystemExit(f"ring mode with NCCL: {args.ranks} ranks need {args.ranks} GPUs, "
                         f"this machine has {torch.cuda.device_count()} (--backend gloo runs "
                         "every rank on one)")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ranks.json")
        mp.spawn(_ring_worker, args=(args, os.path.join(tmp, "init"), out), nprocs=args.ranks)
        with open(out) as f:
            ranks = json.load(f)
    return {"mode": "ring", "backend": args.backend, "ranks": ranks, **_ring_summary(args, ranks)}


MODES = {"single": single, "simulate": simulate, "ring": ring}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="single,simulate",
                        help="comma-separated: " + ", ".join(MODES))
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--n", type=int, default=1 << 20, help="the whole sequence's length")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl",
                        help="ring mode's process group")
    args = parser.parse_args()
    if args.n % (2 * args.ranks):
        parser.error(f"--n ({args.n}) must be a multiple of 2 x --ranks = {2 * args.ranks}")
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in MODES:
            parser.error(f"--modes: unknown mode {mode!r} (known: {', '.join(MODES)})")
    shape = {"n": args.n, "heads": args.heads, "d": args.d, "causal": args.causal,
             "ranks": args.ranks, "gpu": torch.cuda.get_device_name()}
    results = {}
    for mode in modes:
        results[mode] = MODES[mode](args)
        print(json.dumps({**shape, **results[mode]}), flush=True)
        torch.cuda.empty_cache()
    if "single" in results:
        for mode in ("simulate", "ring"):
            if mode in results:
                ratio = results["single"]["seconds"] / results[mode]["seconds"]
                print(f"{mode}: {args.ranks} ranks {results[mode]['seconds']:.3f} s vs one GPU "
                      f"{results['single']['seconds']:.3f} s: scaling {ratio:.2f}x "
                      f"({ratio / args.ranks:.0%} of {args.ranks}x); a step sends "
                      f"{results[mode]['largest_step_bytes'] / 2**30:.2f} GiB, hidden at "
                      f"{results[mode]['hiding_bandwidth_gb_s']:.1f} GB/s")


if __name__ == "__main__":
    main()
