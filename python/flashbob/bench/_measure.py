"""The measurements on the GPU: the inputs, each implementation's attention, each operation's
step, one cell's timing and peak memory, the matmul ceiling and the float64 check of FlashBoB.
Needs torch >= 2.4 with CUDA (the caller checked: _env.torch_problem) and flashbob.torch."""

import contextlib
import gc
import math
import time
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashbob.torch as fb

from ._result import OK, Result, classify
from ._spec import OPS, SDPA_BACKENDS

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# The relative L2 error FlashBoB may have against float64 on the same rounded inputs (the
# bounds of test/python/test_torch_attention.py).
CHECK_BOUND = {"bf16": 5e-3, "fp16": 1e-3}
CHECK_HEADS, CHECK_N = 2, 256
MIN_FLUSH_BYTES = 256 << 20


class Flusher:
    """Writes a buffer larger than the L2 (at least 256 MiB, 4x the L2) before each timed run."""

    def __init__(self, device):
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
        self.nbytes = max(MIN_FLUSH_BYTES, 4 * l2)
        self.buffer = torch.empty(self.nbytes, dtype=torch.uint8, device=device)
        self.count = 0

    def __call__(self):
        self.count = (self.count + 1) & 0xFF
        self.buffer.fill_(self.count)


class Inputs:
    """q, k, v, dO (these four require grad) and the directions uQ, uK, uV (also the JVP's
    tangents), (batch, heads, N, d)."""

    def __init__(self, batch, heads, n, d, dtype, device, seed):
        g = torch.Generator(device=device).manual_seed(seed)
        shape = (batch, heads, n, d)
        self.tensors = [torch.randn(shape, device=device, dtype=dtype, generator=g) for _ in range(7)]
        for t in self.tensors[:4]:
            t.requires_grad_()


def causal_mask(n, dtype, device):
    """The additive causal mask of eager attention: -inf above the diagonal, 0 elsewhere."""
    return torch.full((n, n), float("-inf"), dtype=dtype, device=device).triu(1)


def eager_attention(q, k, v, mask):
    """softmax(q k^T s + mask) v in tensor ops: what autograd differentiates in every mode."""
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if mask is not None:
        s = s + mask
    return torch.softmax(s, dim=-1) @ v


def attention_fn(impl, causal, inputs):
    """attn(q, k, v) of one implementation (SDPA's backend is chosen by backend_context)."""
    if impl == "flashbob":
        return lambda q, k, v: fb.attention(q, k, v, causal=causal)
    if impl == "eager":
        # Made for the cell and freed with it: N^2 elements that no other cell should hold.
        q = inputs.tensors[0]
        mask = causal_mask(q.shape[2], q.dtype, q.device) if causal else None
        return lambda q, k, v: eager_attention(q, k, v, mask)
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def backend_context(impl):
    if impl in SDPA_BACKENDS:
        return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[impl]))
    return contextlib.nullcontext()


def make_step(op, attn, inputs):
    """The callable one timed run makes. BoB's first backward (with create_graph) is made here,
    once, and each run takes the second backward through it (retain_graph)."""
    q, k, v, do, uq, uk, uv = inputs.tensors
    if op == "fwd":
        def step():
            with torch.no_grad():
                attn(q, k, v)
    elif op == "fwd-bwd":
        def step():
            out = attn(q, k, v)
            torch.autograd.grad(out, (q, k, v), do)
    elif op == "fwd-jvp":
        primals = (q.detach(), k.detach(), v.detach())

        def step():
            torch.func.jvp(attn, primals, (uq, uk, uv))
    elif op == "bob":
        first = torch.autograd.grad(attn(q, k, v), (q, k, v), do, create_graph=True)

        def step():
            torch.autograd.grad(first, (q, k, v, do), (uq, uk, uv), retain_graph=True)
    elif op == "hvp":
        def step():
            out = attn(q, k, v)
            first = torch.autograd.grad(out, (q, k, v), do, create_graph=True)
            torch.autograd.grad(first, (q, k, v, do), (uq, uk, uv))
    else:
        raise ValueError(f"unknown operation {op!r} (one of {', '.join(OPS)})")
    return step


def _time(result, cell, inputs, warmup, iters, flush):
    """Fills result with the peak memory and the timed runs; raises what the cell raises."""
    with backend_context(cell.impl):
        step = make_step(cell.op, attention_fn(cell.impl, cell.causal, inputs), inputs)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        result.peak_bytes = torch.cuda.max_memory_allocated() - base
        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(iters):
            flush()
            start.record()
            step()
            end.record()
            end.synchronize()
            result.times_ms.append(start.elapsed_time(end))


def run_cell(cell, inputs, config, flush, ceiling_tflops):
    """One cell's Result; an exception becomes OOM, refused or failed (never raised)."""
    t0 = time.perf_counter()
    result = Result(cell, config.batch, config.heads, config.dtype, OK, ceiling_tflops=ceiling_tflops)
    failure = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _time(result, cell, inputs, config.warmup, config.iters, flush)
        except Exception as e:  # every failure is recorded in the cell, the run goes on
            failure = (type(e).__name__, str(e))
        messages = [str(w.message) for w in caught]
    if failure is not None:
        result.status, result.detail = classify(cell.impl, failure[0], failure[1], messages)
        result.times_ms = []
        gc.collect()  # the exception's frames held the cell's tensors in reference cycles
    # The allocator's cache goes back to the device before the next cell: an OOM of one cell
    # must not come from what another kept.
    torch.cuda.empty_cache()
    result.wall_s = time.perf_counter() - t0
    return result


def measure_ceiling(sizes, device, runs=10):
    """The best bf16 matmul TFLOP/s over square sizes (each: 3 warm-ups, best of `runs`)."""
    per_size = {}
    errors = []
    for s in sizes:
        try:
            g = torch.Generator(device=device).manual_seed(s)
            a = torch.randn(s, s, device=device, dtype=torch.bfloat16, generator=g)
            b = torch.randn(s, s, device=device, dtype=torch.bfloat16, generator=g)
            for _ in range(3):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            best = math.inf
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(runs):
                start.record()
                torch.matmul(a, b)
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end))
            per_size[s] = 2.0 * s ** 3 / (best * 1e-3) / 1e12
        except Exception as e:  # a size that does not fit is left out
            errors.append(f"{s}^3: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        a = b = None
        gc.collect()
        torch.cuda.empty_cache()
    if not per_size:
        return {"tflops": None, "sizes": list(sizes), "error": "; ".join(errors) or "no size ran"}
    size = max(per_size, key=per_size.get)
    return {"tflops": per_size[size], "size": size, "sizes": list(per_size), "per_size": per_size}


ALL_OUTPUTS = ("O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO", "tO")
# Which outputs of the check each operation's timing relies on.
CHECK_OUTPUTS = {"fwd": ("O",), "fwd-bwd": ("O", "dQ", "dK", "dV"), "fwd-jvp": ("tO",),
                 "bob": ("gQ", "gK", "gV", "gdO"), "hvp": ("O", "dQ", "dK", "dV", "gQ", "gK", "gV", "gdO")}


def _outputs(attn, tensors, names):
    """The outputs `names` (of ALL_OUTPUTS) of attn on the leaves `tensors`: O, the first
    backward's dQ, dK, dV, BoB's gQ, gK, gV, gdO, the JVP's tO; only what they need runs."""
    q, k, v, do, uq, uk, uv = tensors
    out = {}
    if any(n != "tO" for n in names):
        o = attn(q, k, v)
        out["O"] = o
        if any(n not in ("O", "tO") for n in names):
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, create_graph=True)
            out.update(dQ=dq, dK=dk, dV=dv)
            if any(n.startswith("g") for n in names):
                gq, gk, gv, gdo = torch.autograd.grad((dq, dk, dv), (q, k, v, do), (uq, uk, uv))
                out.update(gQ=gq, gK=gk, gV=gv, gdO=gdo)
    if "tO" in names:
        out["tO"] = torch.func.jvp(attn, (q.detach(), k.detach(), v.detach()), (uq, uk, uv))[1]
    return {n: out[n].detach() for n in names}


def check_flashbob(config, device):
    """FlashBoB against eager float64 autograd on the same rounded inputs, at batch 1, 2 heads,
    N = M = 256, for every head dim and mask of the grid and the outputs the chosen operations
    produce. Returns {"passed", "worst": (what, error), "bound", "errors", "shape", "dtype"}."""
    dtype = DTYPES[config.dtype]
    bound = CHECK_BOUND[config.dtype]
    wanted = {n for op in config.ops for n in CHECK_OUTPUTS[op]}
    names = [n for n in ALL_OUTPUTS if n in wanted]
    errors, problems = {}, []
    for d in config.head_dims:
        for causal in config.causal_modes:
            where = f"d={d}{' causal' if causal else ''}"
            try:
                g = torch.Generator(device=device).manual_seed(d + causal)
                base = [torch.randn(1, CHECK_HEADS, CHECK_N, d, device=device,
                                    generator=g).to(dtype) for _ in range(7)]
                low = [t.clone().requires_grad_(i < 4) for i, t in enumerate(base)]
                high = [t.double().requires_grad_(i < 4) for i, t in enumerate(base)]
                got = _outputs(lambda q, k, v: fb.attention(q, k, v, causal=causal), low, names)
                mask = causal_mask(CHECK_N, torch.float64, device) if causal else None
                want = _outputs(lambda q, k, v: eager_attention(q, k, v, mask), high, names)
                for name in names:
                    a, b = got[name].double(), want[name]
                    errors[f"{name} {where}"] = ((a - b).norm() / b.norm()).item()
            except Exception as e:  # a check that cannot run is a failed check
                problems.append(f"{where}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    finite = {k: v for k, v in errors.items() if math.isfinite(v)}
    worst = max(errors.items(), key=lambda kv: kv[1] if math.isfinite(kv[1]) else math.inf) if errors else None
    passed = (not problems and bool(errors) and len(finite) == len(errors)
              and all(v <= bound for v in errors.values()))
    return {"passed": passed, "worst": worst, "bound": bound, "errors": errors, "problems": problems,
            "dtype": config.dtype, "outputs": names,
            "shape": f"batch 1, {CHECK_HEADS} heads, N = M = {CHECK_N}, outputs {', '.join(names)}"}


def cudnn_version():
    v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if not v:
        return "none"
    if v >= 10000:  # cuDNN 9 on: major * 10000 + minor * 100 + patch
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"
