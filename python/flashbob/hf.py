"""FlashBoB as a Hugging Face transformers attention implementation, "flashbob": exact attention whose
backward is itself differentiable (BoB), so Hessian-vector products, second-order optimizers and
meta-learning run through a transformers model without materializing the attention matrix.

    import torch
    import flashbob.hf  # registers "flashbob" (flashbob.hf.register() again is harmless)
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=2, head_dim=64)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="flashbob")
    model = model.to("cuda", torch.bfloat16)
    # or, on a model already built: model.set_attn_implementation("flashbob")

    loss = model(input_ids, attention_mask=mask, labels=labels).loss
    g = torch.autograd.grad(loss, params, create_graph=True)
    hvp = torch.autograd.grad(g, params, v)                       # runs BoB in every layer

What registering does:
- `AttentionInterface.register("flashbob", attention_forward)`: the models' attention layers look
  their function up by `config._attn_implementation` (ALL_ATTENTION_FUNCTIONS.get_interface).
- `AttentionMaskInterface.register("flashbob", <flash-attention's mask function>)`: mask creation
  (masking_utils.create_causal_mask and the sliding / bidirectional variants) dispatches on the same
  name and builds *no mask at all* for a name it does not know, which would silently drop padding.
  Registered like flash-attention, the layers receive the 2D (batch, kv_len) padding mask, True at
  real tokens, or None when nothing is padded; causality and the sliding window are this module's.
- transformers takes every implementation whose name contains "flash" for a flavour of
  flash-attention (is_flash_attention_requested) and tries to preload a flash-attn package or hub
  kernel of that name when a model is built; the call that does so (lazy_import_flash_attention,
  as transformers.modeling_utils and modeling_flash_attention_utils bind it) is wrapped to return
  None for "flashbob" and to do as before for every other name; nothing else is changed.

Semantics, the same as transformers' flash-attention path (and so as eager at the real tokens):
- query (batch, heads, seq_q, d), key/value (batch, heads_kv, seq_k, d): grouped-query attention
  goes to the kernels as it is (heads_kv dividing heads; K and V are never repeated).
- causal: `is_causal` from the call's kwargs, else module.is_causal (default True); bottom-right
  aligned, so a shorter query block (decoding with a cache) sees every earlier key.
- scaling: the softmax scale (None: 1/sqrt(d)).
- sliding_window W: W keys including the query's own (transformers' masks keep kv > q - W), i.e.
  flash-attn's window_size (W - 1, 0) when causal and (W - 1, W - 1) when not; a window as long as
  the keys is no window.
- padding (a 2D mask): the real tokens are packed (their flattened indices, cu_seqlens from the
  row lengths), attention_varlen runs each row as its own sequence, and the output is scattered
  back with zeros at the padded positions. The keys are the row's masked-in positions; the queries
  are the masked-in positions among the last seq_q (a single query row, decoding, is always kept),
  so left padding with a cache aligns as flash-attn's unpadding does. Padded query rows come back
  0 where eager's fully-masked rows hold an average; only real-token rows are comparable.
- packed batches without a mask: explicit cu_seq_lens_q / cu_seq_lens_k (with max_length_q/k or
  max_seqlen_q/k) kwargs, as DataCollatorWithFlattening makes, run attention_varlen over the
  flattened batch; so does a batch of one whose position_ids restart (a position that does not
  follow its predecessor by one starts a new sequence, as transformers' packed-sequence mask).
- returns (attn_output (batch, seq_q, heads, d), None): no attention weights.

Refused with a clear error: dropout > 0 (FlashBoB is exact attention without dropout: evaluate the
model with model.eval() or set config.attention_dropout = 0), softcap, attention sinks (s_aux), a
4D or block mask (pass the 2D padding mask instead), inputs that are neither bf16 nor fp16 outside
autocast (under autocast they run in the autocast dtype, as flash-attention's path casts them).

Each padded call finds the real tokens with nonzero() (a device synchronization, as flash-attn's
unpadding; the sequence bounds are the padded lengths, so no length is read back, and
attention_varlen's own check of the offsets is skipped with FLASHBOB_CHECK_OFFSETS=0), and an
unmasked batch of one with position_ids reads back whether they restart (as flash-attn's path
does). The function runs under torch.compile (graph breaks at the data-dependent packing), not
under vmap.
"""

import functools
import warnings

import torch
import torch.nn.functional as F

from .torch import attention as _attention, attention_varlen as _attention_varlen

__all__ = ["NAME", "register", "attention_forward"]

NAME = "flashbob"
_HALF = (torch.bfloat16, torch.float16)
_registered = False


# --- the attention function -------------------------------------------------------------------

def _refuse_unsupported(dropout, softcap, kwargs):
    if dropout is not None and float(dropout) != 0.0:
        raise ValueError(
            f"flashbob attention has no dropout (got dropout={dropout}): FlashBoB is exact attention. "
            f"Run the model in eval mode (model.eval()) or set config.attention_dropout = 0.0")
    if softcap is not None:
        raise ValueError(f"flashbob attention does not support logit softcapping (softcap={softcap}); "
                         f"use attn_implementation='eager' for this model")
    if kwargs.get("s_aux") is not None:
        raise ValueError("flashbob attention does not support attention sinks (s_aux); use "
                         "attn_implementation='eager' for this model")
    if kwargs.get("head_mask") is not None:
        raise ValueError("flashbob attention does not support head_mask")
    if kwargs.get("output_attentions", False):
        warnings.warn("flashbob attention does not return attention weights (output_attentions=True "
                      "gives None); use attn_implementation='eager' to get them", stacklevel=3)


def _compute_dtype(query, key, value):
    """q, k, v in the dtype the kernels run: their own if bf16/fp16, the autocast dtype under
    autocast (what flash-attention's path does with upcast inputs), else a clear error."""
    if query.dtype in _HALF and key.dtype == query.dtype and value.dtype == query.dtype:
        return query, key, value
    device_type = query.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        if dtype in _HALF:
            return query.to(dtype), key.to(dtype), value.to(dtype)
    raise TypeError(f"flashbob attention runs in bfloat16 or float16, got query {query.dtype}, key "
                    f"{key.dtype}, value {value.dtype}: build the model in bf16 "
                    f"(model.to(torch.bfloat16)) or run it under torch.autocast")


def _window(sliding_window, causal, key_bound):
    """flash-attn's window_size for transformers' sliding_window W (W keys including the query's
    own); no window when W covers every key (key_bound: the most keys a query can have)."""
    if sliding_window is None:
        return (-1, -1)
    w = int(sliding_window)
    if w < 1:
        raise ValueError(f"sliding_window must be a positive number of keys, got {sliding_window}")
    if w >= key_bound:
        return (-1, -1)
    return (w - 1, 0) if causal else (w - 1, w - 1)


def _rows(x):
    """(batch, heads, seq, d) -> (batch * seq, heads, d), a view where the layout allows."""
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b * s, h, d)


def _offsets(keep):
    """The packed rows of a (batch, len) bool mask: flattened indices of its True entries and the
    int32 offsets (batch + 1) of each row's run."""
    lengths = keep.sum(dim=-1, dtype=torch.int32)
    cu = F.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))
    return keep.reshape(-1).nonzero().squeeze(1), cu


def _varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal, scaling, sliding_window):
    window = _window(sliding_window, causal, max_k)
    return _attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal, scale=scaling,
                             window_size=window)


def _padded(query, key, value, mask, causal, scaling, sliding_window):
    b, h, sq, d = query.shape
    if mask.dim() != 2 or mask.shape[0] != b:
        raise ValueError(
            f"flashbob attention takes a 2D (batch, kv_len) padding mask or None, got a mask of shape "
            f"{tuple(mask.shape)}: custom 4D masks cannot be honoured exactly; pass the 2D "
            f"attention_mask to the model, or use attn_implementation='eager'")
    mask = mask.to(device=query.device, dtype=torch.bool)
    sk = key.shape[2]
    if mask.shape[1] > sk:      # the mask's newest kv_len columns are the keys'
        mask = mask[:, -sk:]
    elif mask.shape[1] < sk:    # a static cache's unused slots lie past the mask
        sk = mask.shape[1]
        key, value = key[:, :, :sk], value[:, :, :sk]
    if sq > sk:
        raise ValueError(f"flashbob attention: {sq} query rows but only {sk} keys in the mask")

    idx_k, cu_k = _offsets(mask)
    if sq == sk:
        idx_q, cu_q = idx_k, cu_k
    elif sq == 1:               # decoding: each row's one query, whatever the mask says of it
        cu_q = torch.arange(b + 1, dtype=torch.int32, device=query.device)
        idx_q = cu_q[:-1].long()
    else:                       # the queries are the last sq positions (left padding)
        idx_q, cu_q = _offsets(mask[:, -sq:])
    out = query.new_zeros(b * sq, h, d)
    if idx_q.numel() == 0 or idx_k.numel() == 0:
        return out.view(b, sq, h, d)
    q = _rows(query).index_select(0, idx_q)
    k = _rows(key).index_select(0, idx_k)
    v = _rows(value).index_select(0, idx_k)
    # The padded lengths bound every row's lengths (attention_varlen takes any bound), so nothing
    # but the indices is read back from the device.
    o = _varlen(q, k, v, cu_q, cu_k, sq, sk, causal, scaling, sliding_window)
    return out.index_copy(0, idx_q, o).view(b, sq, h, d)


def _as_int(x):
    return int(x.item()) if isinstance(x, torch.Tensor) else int(x)


def _given_offsets(query, key, value, kwargs, causal, scaling, sliding_window):
    """The packed batch that cu_seq_lens_q / cu_seq_lens_k kwargs describe (flattened over the
    batch), or None without them."""
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if cu_q is None or cu_k is None:
        return None
    b, h, sq, d = query.shape
    max_q = kwargs.get("max_length_q", kwargs.get("max_seqlen_q"))
    max_k = kwargs.get("max_length_k", kwargs.get("max_seqlen_k"))
    max_q = b * sq if max_q is None else _as_int(max_q)
    max_k = b * key.shape[2] if max_k is None else _as_int(max_k)
    o = _varlen(_rows(query), _rows(key), _rows(value), cu_q.to(torch.int32), cu_k.to(torch.int32),
                max_q, max_k, causal, scaling, sliding_window)
    return o.view(b, sq, h, d)


def _packed_positions(query, key, value, position_ids, causal, scaling, sliding_window):
    """A batch of one holding several sequences, told by position_ids that restart (each position
    not its predecessor's + 1 starts a sequence); None if it holds one sequence."""
    b, h, sq, d = query.shape
    if b != 1 or position_ids is None or key.shape[2] != sq or position_ids.numel() != sq:
        return None
    pos = position_ids.reshape(-1).to(query.device)
    starts = torch.ones(sq, dtype=torch.bool, device=query.device)
    starts[1:] = pos[1:] != pos[:-1] + 1
    if not bool(starts[1:].any()):
        return None
    cu = torch.cat([starts.nonzero().squeeze(1),
                    torch.tensor([sq], device=query.device)]).to(torch.int32)
    o = _varlen(_rows(query), _rows(key), _rows(value), cu, cu, sq, sq, causal, scaling,
                sliding_window)
    return o.view(b, sq, h, d)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      sliding_window=None, softcap=None, **kwargs):
    """transformers' attention function signature: query (batch, heads, seq_q, d), key/value
    (batch, heads_kv, seq_k, d), attention_mask the 2D padding mask (True/1 at real tokens) or
    None. Returns (attn_output (batch, seq_q, heads, d), None)."""
    _refuse_unsupported(dropout, softcap, kwargs)
    causal = kwargs.pop("is_causal", None)
    if causal is None:
        causal = getattr(module, "is_causal", True)
    causal = bool(causal)
    query, key, value = _compute_dtype(query, key, value)

    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor):
            raise ValueError(f"flashbob attention takes a 2D padding mask or None, got "
                             f"{type(attention_mask).__name__}: use attn_implementation='flex_attention' "
                             f"for block masks")
        return _padded(query, key, value, attention_mask, causal, scaling, sliding_window), None
    for packed in (_given_offsets(query, key, value, kwargs, causal, scaling, sliding_window),
                   _packed_positions(query, key, value, kwargs.get("position_ids"), causal, scaling,
                                     sliding_window)):
        if packed is not None:
            return packed, None
    window = _window(sliding_window, causal, key.shape[2])
    o = _attention(query, key, value, causal=causal, scale=scaling, window_size=window)
    return o.transpose(1, 2).contiguous(), None


# --- registration ------------------------------------------------------------------------------

def _padding_mask(*args, attention_mask=None, kv_length=None, **kwargs):
    """The 2D padding mask for the layers, or None without padding (flash-attention's convention),
    for a transformers that has no flash-attention mask function to share."""
    if attention_mask is None or attention_mask.dim() != 2:
        return attention_mask
    if kv_length is not None:
        attention_mask = attention_mask[:, -kv_length:]
    if (kv_length is None or attention_mask.shape[1] == kv_length) and bool(attention_mask.all()):
        return None
    return attention_mask


def _skip_flash_preload():
    """Keep model construction from preloading a flash-attn package or hub kernel for "flashbob"
    (transformers takes any name containing "flash" for flash-attention): lazy_import_flash_attention,
    where modeling_utils and modeling_flash_attention_utils bind it, returns None for "flashbob" and
    does what it did for every other name."""
    import importlib

    for module_name in ("transformers.modeling_utils", "transformers.modeling_flash_attention_utils"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        original = getattr(module, "lazy_import_flash_attention", None)
        if original is None or getattr(original, "_flashbob_skips", False):
            continue
        setattr(module, "lazy_import_flash_attention", _skipping(original))


def _skipping(original):
    @functools.wraps(original)
    def lazy_import_flash_attention(*args, **kwargs):
        implementation = args[0] if args else kwargs.get("implementation")
        if implementation == NAME:
            return None
        return original(*args, **kwargs)

    lazy_import_flash_attention._flashbob_skips = True
    return lazy_import_flash_attention


def register():
    """Registers "flashbob" with transformers' AttentionInterface and AttentionMaskInterface
    (idempotent; importing flashbob.hf calls it). Returns the name."""
    global _registered
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(NAME, attention_forward)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    except ImportError:  # a transformers without mask interface passes the 2D mask through
        AttentionMaskInterface = None
    if AttentionMaskInterface is not None:
        try:
            mask_function = ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"]
        except KeyError:
            mask_function = _padding_mask
        AttentionMaskInterface.register(NAME, mask_function)
    _skip_flash_preload()
    _registered = True
    return NAME


register()
