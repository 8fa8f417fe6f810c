"""flashbob.hf, the "flashbob" attention implementation for Hugging Face transformers: the attention
function against a float64 reference of transformers' masking conventions (padding on either side,
decoding with a cache, the sliding window of W keys, packed sequences; first and second
derivatives), a Llama model's padded-batch logits against eager attention, the HVP example's claim
(python/examples/hf_llama_hvp.py: loss, gradient and Hessian-vector product within bf16 tolerance
of eager, judged against a float64 run), and the refusals (dropout, softcap). Needs transformers,
torch and a CUDA GPU; skipped otherwise."""

import math
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="flashbob.hf needs torch")
pytest.importorskip("transformers", reason="flashbob.hf needs Hugging Face transformers")
if not torch.cuda.is_available():
    pytest.skip("flashbob.hf needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "examples"))

import flashbob.hf as fbhf  # noqa: E402
import hf_llama_hvp as example  # noqa: E402

TOL = 5e-3  # bf16 against float64 on the same bf16 inputs, as test_torch_attention.py
CAUSAL = types.SimpleNamespace(is_causal=True)


def rel(got, ref):
    got, ref = got.double(), ref.double()
    return ((got - ref).norm() / ref.norm()).item()


# --- the attention function against a float64 reference ----------------------------------------

def reference(q, k, v, allowed, scale):
    """softmax(scale q k^T) v in float64 where `allowed` (batch, seq_q, seq_k) holds, key/value heads
    repeated over their groups; a row allowed no key gives 0. Returns (batch, seq_q, heads, d)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = scale * q @ k.transpose(-1, -2)
    allowed = allowed[:, None]
    seen = allowed.any(dim=-1, keepdim=True)
    s = s.masked_fill(~allowed, float("-inf")).masked_fill(~seen, 0.0)
    return ((torch.softmax(s, dim=-1) * seen) @ v).transpose(1, 2)


def padded_allowed(mask, seq_q, causal, window):
    """transformers' convention: the queries are the last seq_q positions of the mask's keys; a
    query attends to real keys, not later ones if causal, and within `window` keys of itself
    (kv > q - window)."""
    seq_k = mask.shape[1]
    qpos = torch.arange(seq_k - seq_q, seq_k, device=mask.device)[:, None]
    kpos = torch.arange(seq_k, device=mask.device)[None, :]
    allowed = mask[:, None, :].expand(-1, seq_q, -1).clone()
    if causal:
        allowed &= kpos <= qpos
    if window is not None:
        allowed &= kpos > qpos - window
    return allowed


def padding_mask(lengths, seq, side):
    mask = torch.zeros(len(lengths), seq, dtype=torch.bool, device="cuda")
    for row, n in enumerate(lengths):
        if side == "left":
            mask[row, seq - n:] = True
        else:
            mask[row, :n] = True
    return mask


def first_and_second_order(attn, q, k, v, w, u):
    """O, dQ, dK, dV of <O, w>, and gQ, gK, gV of <dQ, uq> + <dK, uk> + <dV, uv>."""
    o = attn(q, k, v)
    grads = torch.autograd.grad((o * w).sum(), (q, k, v), create_graph=True)
    second = torch.autograd.grad(grads, (q, k, v), u)
    return [o, *grads, *second]


def check_against_reference(q, k, v, real_rows, allowed, call, scale=0.125, seed=0):
    """flashbob's O at the real query rows (0 elsewhere) and every derivative, with an upstream
    gradient w that is 0 at the other rows, against float64 autograd through `allowed`."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    b, h, sq, d = q.shape
    w = torch.randn(b, sq, h, d, device="cuda", generator=g) * real_rows[:, :, None, None]
    u = [torch.randn(t.shape, device="cuda", generator=g).to(t.dtype) for t in (q, k, v)]
    low = [t.clone().requires_grad_() for t in (q, k, v)]
    high = [t.double().requires_grad_() for t in (q, k, v)]
    got = first_and_second_order(call, *low, w.to(q.dtype), u)
    ref = first_and_second_order(lambda q, k, v: reference(q, k, v, allowed, scale), *high,
                                 w.double(), [x.double() for x in u])
    o = got[0]
    assert o.shape == (b, sq, h, d) and o.dtype == q.dtype
    assert bool((o[~real_rows] == 0).all()), "padded query rows must be 0"
    keep = real_rows[:, :, None, None]
    errors = {"O": rel(o * keep, ref[0] * keep)}
    errors.update({name: rel(a, r) for name, a, r in
                   zip(["dQ", "dK", "dV", "gQ", "gK", "gV"], got[1:], ref[1:])})
    print({name: f"{e:.2e}" for name, e in errors.items()})
    for name, err in errors.items():
        assert math.isfinite(err) and err <= TOL, f"{name}: {err:.2e}"


def qkv(batch, heads, heads_kv, seq_q, seq_k, d=64, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    def r(h, s):  # (batch, seq, heads, d) memory seen as (batch, heads, seq, d), as the models do
        return torch.randn(batch, s, h, d, device="cuda", generator=g).to(torch.bfloat16).transpose(1, 2)
    return r(heads, seq_q), r(heads_kv, seq_k), r(heads_kv, seq_k)


PADDED_CASES = [  # (side, sliding_window)
    ("right", None),
    ("left", None),
    ("right", 48),   # W = 48 keys including the query's own
    ("left", 48),
]


@pytest.mark.parametrize("side,window", PADDED_CASES)
def test_padded_batch_against_reference(side, window):
    """A right- or left-padded batch (2D mask): each row attends causally to its own real keys
    only, within the sliding window; padded rows 0; every derivative as float64's."""
    lengths, seq = (200, 137, 64), 200
    q, k, v = qkv(3, 8, 2, seq, seq, seed=len(side) + (window or 0))
    mask = padding_mask(lengths, seq, side)
    allowed = padded_allowed(mask, seq, True, window)
    call = lambda q, k, v: fbhf.attention_forward(CAUSAL, q, k, v, mask, scaling=0.125,  # noqa: E731
                                                  sliding_window=window)[0]
    check_against_reference(q, k, v, mask, allowed, call)


def test_decoding_with_left_padding_and_a_cache():
    """One new query per row against a cache of 160 keys, left padded: each query sees its row's
    real keys (bottom-right aligned, as flash-attn's unpadding)."""
    lengths, seq = (160, 97, 33), 160
    q, k, v = qkv(3, 8, 2, 1, seq, seed=3)
    mask = padding_mask(lengths, seq, "left")
    allowed = padded_allowed(mask, 1, True, None)
    real = torch.ones(3, 1, dtype=torch.bool, device="cuda")
    call = lambda q, k, v: fbhf.attention_forward(CAUSAL, q, k, v, mask, scaling=0.125)[0]  # noqa: E731
    check_against_reference(q, k, v, real, allowed, call)


def test_chunked_prefill_with_left_padding():
    """40 new queries against 160 keys (a cache of 120), left padded: the queries are the mask's
    last 40 positions."""
    lengths, seq, sq = (160, 97, 33), 160, 40
    q, k, v = qkv(3, 8, 2, sq, seq, seed=4)
    mask = padding_mask(lengths, seq, "left")
    allowed = padded_allowed(mask, sq, True, 24)
    call = lambda q, k, v: fbhf.attention_forward(CAUSAL, q, k, v, mask, scaling=0.125,  # noqa: E731
                                                  sliding_window=24)[0]
    check_against_reference(q, k, v, mask[:, -sq:], allowed, call)


@pytest.mark.parametrize("how", ["position_ids", "cu_seq_lens"])
def test_packed_sequences_in_a_batch_of_one(how):
    """Three sequences packed into one row without a mask, told by restarting position_ids or by
    cu_seq_lens kwargs: block-diagonal causal attention."""
    lengths = (90, 57, 33)
    seq = sum(lengths)
    q, k, v = qkv(1, 8, 2, seq, seq, seed=5)
    segment = torch.repeat_interleave(torch.arange(3, device="cuda"),
                                      torch.tensor(lengths, device="cuda"))
    pos = torch.cat([torch.arange(n, device="cuda") for n in lengths])[None]
    allowed = (segment[:, None] == segment[None, :]) & (pos[0][None, :] <= pos[0][:, None])
    cu = torch.tensor([0, 90, 147, 180], dtype=torch.int32, device="cuda")
    kwargs = ({"position_ids": pos} if how == "position_ids" else
              {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": 90, "max_length_k": 90})
    call = lambda q, k, v: fbhf.attention_forward(CAUSAL, q, k, v, None, scaling=0.125,  # noqa: E731
                                                  **kwargs)[0]
    real = torch.ones(1, seq, dtype=torch.bool, device="cuda")
    check_against_reference(q, k, v, real, allowed[None], call)


def test_no_padding_runs_dense_attention_and_non_causal_modules():
    """No mask: attention() on the batch as it is, causal or not (module.is_causal, overridden by an
    is_causal kwarg)."""
    q, k, v = qkv(2, 4, 4, 96, 96, seed=6)
    mask = torch.ones(2, 96, dtype=torch.bool, device="cuda")
    real = mask
    for causal, module, extra in ((True, CAUSAL, {}),
                                  (False, types.SimpleNamespace(is_causal=False), {}),
                                  (False, CAUSAL, {"is_causal": False})):
        allowed = padded_allowed(mask, 96, causal, None)
        call = lambda q, k, v: fbhf.attention_forward(module, q, k, v, None, scaling=0.125,  # noqa: E731
                                                      **extra)[0]
        check_against_reference(q, k, v, real, allowed, call)


def test_refusals():
    q, k, v = qkv(1, 2, 2, 32, 32, seed=7)
    with pytest.raises(ValueError, match="dropout"):
        fbhf.attention_forward(CAUSAL, q, k, v, None, dropout=0.1)
    with pytest.raises(ValueError, match="softcap"):
        fbhf.attention_forward(CAUSAL, q, k, v, None, softcap=30.0)
    with pytest.raises(ValueError, match="2D"):
        fbhf.attention_forward(CAUSAL, q, k, v, torch.zeros(1, 1, 32, 32, device="cuda"))
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        fbhf.attention_forward(CAUSAL, q.float(), k.float(), v.float(), None)


# --- through transformers ------------------------------------------------------------------------

def test_registered_with_transformers():
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    assert fbhf.register() == "flashbob" and fbhf.register() == "flashbob"  # idempotent
    assert ALL_ATTENTION_FUNCTIONS["flashbob"] is fbhf.attention_forward
    assert "flashbob" in ALL_ATTENTION_FUNCTIONS.valid_keys()
    assert "flashbob" in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping


@pytest.mark.parametrize("padding,lengths", [("right", (200, 137, 64)), ("left", (200, 137, 64)),
                                             ("none", (128, 128))])
def test_llama_padded_logits_match_eager(padding, lengths):
    """A Llama model's logits at the real tokens: flashbob within bf16 tolerance of bf16 eager, and
    no further from the float64 model than about twice bf16 eager is."""
    config = example.make_config()
    batch = example.make_batch(lengths, config.vocab_size, padding)
    models = example.build_models(config)
    with torch.no_grad():
        logits = {name: example.forward(model, batch) for name, model in models.items()}
    real = batch["attention_mask"].bool()
    assert bool(torch.isfinite(logits["flashbob"][real]).all())
    vs_eager = example.relative(logits["flashbob"], logits["eager"], real)
    fb = example.relative(logits["flashbob"], logits["reference"], real)
    eager = example.relative(logits["eager"], logits["reference"], real)
    print(f"{padding}: logits flashbob vs eager {vs_eager:.2e}, vs float64: flashbob {fb:.2e}, "
          f"eager {eager:.2e}")
    assert vs_eager <= example.CAP["logits"]
    assert fb <= example.RATIO * eager + example.FLOOR["logits"] and fb <= example.CAP["logits"]


@pytest.mark.parametrize("padding", ["right", "left"])
def test_example_hvp_within_bf16_tolerance_of_eager(padding):
    """The example's claim: loss, gradient and Hessian-vector product (double backward through every
    layer's attention, BoB) of flashbob as close to float64 as bf16 eager's, within a factor 2."""
    errors = example.compare(padding=padding)
    print(padding, {row: {k: f"{v:.2e}" for k, v in values.items()} for row, values in errors.items()})
    failures = example.check_claim(errors)
    assert not failures, "\n".join(failures)


def test_dropout_in_a_training_model_is_refused():
    config = example.make_config(layers=1)
    config.attention_dropout = 0.1
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_config(config, attn_implementation="flashbob")
    model = model.to("cuda", torch.bfloat16).train()
    batch = example.make_batch((64, 40), config.vocab_size)
    with pytest.raises(ValueError, match="dropout"):
        example.forward(model, batch)
    model.eval()  # eval mode passes dropout 0: runs
    assert bool(torch.isfinite(example.forward(model, batch)).all())
