"""The long-sweep flush seen from PyTorch: 16 query rows against 2^20 keys
(d = 64, bf16, 1 head), the first backward's dQ and BoB's gQ (the outputs of sweeps over a
million keys) against PyTorch float64 autograd on the same bf16 values, with the launcher's
kernels (which flush from 2^17 rows) and with FLASHBOB_LONG_SWEEP=0 (no flush). Each run is a
fresh process (the knob is read once). Relative L2 errors.

    python3 bench/long_sweep_drift.py
"""

import json
import os
import subprocess
import sys

CHILD = r"""
import json, torch
import flashbob.torch as fb
n, m, d = 16, 1 << 20, 64
g = torch.Generator(device="cuda").manual_seed(5)
r = lambda rows: torch.randn(1, 1, rows, d, device="cuda", generator=g).to(torch.bfloat16)
q, k, v, do, uq, uk, uv = r(n), r(m), r(m), r(n), r(n), r(m), r(m)

def outputs(attn, q, k, v, do, uq, uk, uv):
    q, k, v, do = (t.clone().requires_grad_() for t in (q, k, v, do))
    o = attn(q, k, v)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, create_graph=True)
    gq, gk, gv, gdo = torch.autograd.grad((dq, dk, dv), (q, k, v, do), (uq, uk, uv))
    return {"dQ": dq, "gQ": gq, "gdO": gdo}

def reference(q, k, v):
    p = torch.softmax((q @ k.transpose(-1, -2)) / d ** 0.5, dim=-1)
    return p @ v

got = outputs(fb.attention, q, k, v, do, uq, uk, uv)
ref = outputs(reference, *(t.double() for t in (q, k, v, do, uq, uk, uv)))
print(json.dumps({name: ((got[name].double() - ref[name]).norm() / ref[name].norm()).item()
                  for name in got}))
"""


def main():
    for knob in (None, "0"):
        env = dict(os.environ)
        env.pop("FLASHBOB_LONG_SWEEP", None)
        if knob is not None:
            env["FLASHBOB_LONG_SWEEP"] = knob
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                             text=True, check=True)
        errors = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"long_sweep={knob or 'launcher'}: " +
              " ".join(f"{name} {e:.3e}" for name, e in errors.items()))


if __name__ == "__main__":
    main()
