"""LLaDA (GSAI-ML/LLaDA-8B-Base/-Instruct, LLaDA-1.5): OLMo-style config and tensor names.

Block `llama`: x + attn_out(attn(attn_norm(x))), then x + ff_out(silu(ff_proj(h)) * up_proj(h))
with h = ff_norm(x); `transformer.ff_out` is the LM head (unless weight_tying).
Same-position logits, fully bidirectional attention.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..model_config import ModelConfig
from .spec import Family, get, refuse
from .specials import SpecialTokens

_BLOCK = re.compile(r"^model\.transformer\.blocks\.(\d+)\.(\w+)\.(weight|bias)$")
_IN_BLOCK = {
    "attn_norm": "input_layernorm",
    "q_proj": "self_attn.q_proj",
    "k_proj": "self_attn.k_proj",
    "v_proj": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj",
    "ff_norm": "post_attention_layernorm",
    "ff_proj": "mlp.gate_proj",  # the activated branch
    "up_proj": "mlp.up_proj",
    "ff_out": "mlp.down_proj",  # inside a block ff_out is the down projection
}
_TOP = {
    "model.transformer.wte.weight": "model.embed_tokens.weight",
    "model.transformer.ln_f.weight": "model.norm.weight",
    "model.transformer.ff_out.weight": "lm_head.weight",
}


def rename(name: str) -> str | None:
    if name in _TOP:
        return _TOP[name]
    m = _BLOCK.match(name)
    if m and m.group(2) in _IN_BLOCK:
        return f"model.layers.{m.group(1)}.{_IN_BLOCK[m.group(2)]}.{m.group(3)}"
    return name  # unknown: the loader reports it as unexpected, naming its file


_TOP_BACK = {v: k for k, v in _TOP.items()}
_IN_BACK = {v: k for k, v in _IN_BLOCK.items()}
_OURS = re.compile(r"^model\.layers\.(\d+)\.(.+)\.(weight|bias)$")


def their_name(ours: str) -> str:
    """Our tensor name -> LLaDA's, for error messages about tensors that are missing."""
    if ours in _TOP_BACK:
        return _TOP_BACK[ours]
    m = _OURS.match(ours)
    if m and m.group(2) in _IN_BACK:
        return f"model.transformer.blocks.{m.group(1)}.{_IN_BACK[m.group(2)]}.{m.group(3)}"
    return ours


def build(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    # Options of the OLMo block our one model does not implement: refuse rather than run wrong.
    for key, ok in (("block_type", ("llama",)), ("layer_norm_type", ("rms",)), ("activation_type", ("silu",))):
        if str(raw.get(key, ok[0])) not in ok:
            refuse(path, key, raw[key], f"expected one of {ok}")
    for key in ("alibi", "attention_layer_norm", "include_bias", "scale_logits", "input_emb_norm", "clip_qkv"):
        if raw.get(key):
            refuse(path, key, raw[key], "not used by LLaDA and not implemented")
    if raw.get("rope") is False:
        refuse(path, "rope", False, "LLaDA uses rotary embeddings")
    d = int(get(raw, "d_model", path))
    heads = int(get(raw, "n_heads", path))
    kv = 1 if raw.get("multi_query_attention") else int(get(raw, "n_kv_heads", path, heads))
    mlp = raw.get("mlp_hidden_size") or int(get(raw, "mlp_ratio", path)) * d
    eos = sp.require("EOS", config_keys=("eos_token_id",), role="eos_token", texts=("<|endoftext|>",))
    eot = sp.find(texts=("<|eot_id|>",))
    pad = sp.find(config_keys=("pad_token_id",), role="pad_token")
    return ModelConfig(
        vocab_size=int(get(raw, ("embedding_size", "vocab_size"), path)),
        hidden_size=d,
        num_layers=int(get(raw, "n_layers", path)),
        num_heads=heads,
        num_kv_heads=kv,
        intermediate_size=int(mlp),
        rope_theta=float(get(raw, "rope_theta", path, 10000.0)),
        rms_norm_eps=float(get(raw, "rms_norm_eps", path, 1e-5)),
        max_position_embeddings=int(get(raw, "max_sequence_length", path, 4096)),
        qkv_bias=bool(raw.get("include_qkv_bias", False)),
        tie_word_embeddings=bool(raw.get("weight_tying", False)),
        logits_shift=False,
        attention="bidirectional",
        family="llada",
        mask_token_id=sp.require("mask", config_keys=("mask_token_id",), role="mask_token", texts=("<|mdm_mask|>",)),
        pad_token_id=eos if pad is None else pad,
        eos_token_id=eos,
        extra={"infill": "masks", "end_ids": sp.end_ids(eos, eot)},
    )


FAMILY = Family("llada", ("LLaDAModelLM",), ("llada",), build, rename, their_name=their_name)
