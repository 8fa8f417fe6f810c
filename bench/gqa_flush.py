"""GQA 8:1 against equal heads through the PyTorch operators, with the launcher's choice of
kernels and with FLASHBOB_LONG_SWEEP=0: batch 1, 16 query heads, N = M = 16384,
d = 128, bf16. With 2 key/value heads each key block sweeps 8 x 16384 = 2^17 query rows, where
the launcher switches to the long-sweep kernels that flush (kernels::kLongSweepRows), so part of
the gap to equal heads may be the flush, not the grouping. Each configuration runs in a fresh
process (the knob is read once); median of 20 calls after 3, CUDA events, two rounds.

    python3 bench/gqa_flush.py
"""

import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, torch
import flashbob.torch  # registers torch.ops.flashbob
g = torch.Generator(device="cuda").manual_seed(1)
r = lambda h: torch.randn(1, h, 16384, 128, device="cuda", generator=g).to(torch.bfloat16)
config = (False, -1, -1, 0.0, None, None, 0, 0)
results = []
for rnd in (1, 2):
    for kv in map(int, sys.argv[1:]):
        q, k, v, do, uq, uk, uv = r(16), r(kv), r(kv), r(16), r(16), r(kv), r(kv)
        o, lse = torch.ops.flashbob.forward(q, k, v, *config)
        calls = {"bwd": lambda: torch.ops.flashbob.backward(q, k, v, o, lse, do, *config),
                 "bob": lambda: torch.ops.flashbob.bob(q, k, v, o, lse, do, uq, uk, uv, *config)}
        for op, call in calls.items():
            for _ in range(3):
                call()
            times = []
            for _ in range(20):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); call(); b.record(); torch.cuda.synchronize()
                times.append(a.elapsed_time(b))
            results.append((rnd, op, kv, sorted(times)[len(times) // 2]))
print(json.dumps(results))
"""


def main():
    # The knob changes nothing at 16 heads (16K-row sweeps run the plain kernels either way).
    for knob, heads_kv in ((None, ("16", "2")), ("0", ("2",))):
        env = dict(os.environ)
        env.pop("FLASHBOB_LONG_SWEEP", None)
        if knob is not None:
            env["FLASHBOB_LONG_SWEEP"] = knob
        out = subprocess.run([sys.executable, "-c", CHILD, *heads_kv], env=env,
                             capture_output=True, text=True, check=True)
        for rnd, op, kv, ms in json.loads(out.stdout.strip().splitlines()[-1]):
            print(f"round {rnd} {op} kv={kv} long_sweep={knob or 'launcher'}: {ms:.3f} ms")


if __name__ == "__main__":
    main()
