"""Block diffusion: causal between blocks, bidirectional inside a block; the K/V of
finished blocks is exact, so the context cache is too.

- SDAR (JetLM): Qwen3 names with q_norm/k_norm, same-position logits, `block_size` in config.json.
- Fast-dLLM v2 (Efficient-Large-Model): Qwen2.5 names with q/k/v bias, shifted logits
  (token shift), `bd_size` in config.json.
"""

from __future__ import annotations

from pathlib import Path

from ..model_config import ModelConfig
from .spec import Family, get, qwen_config, skip_rotary
from .specials import SpecialTokens

MASK_TEXTS = ("<|MASK|>", "|<MASK>|", "<|mask|>", "<mask>", "[MASK]")


def _ids(sp: SpecialTokens) -> dict:
    mask = sp.require("mask", config_keys=("mask_token_id",), role="mask_token", texts=MASK_TEXTS)
    eos = sp.require("EOS", config_keys=("eos_token_id",), role="eos_token", texts=("<|endoftext|>", "<|im_end|>"))
    pad = sp.find(config_keys=("pad_token_id",), role="pad_token")
    return dict(mask_token_id=mask, eos_token_id=eos, pad_token_id=eos if pad is None else pad,
                extra={"infill": "block", "end_ids": sp.end_ids(eos, sp.find(texts=("<|endoftext|>",)))})


def build_sdar(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    return qwen_config(
        raw, path, qk_norm=True, qkv_bias=bool(raw.get("attention_bias", False)),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)), logits_shift=False,
        attention="block", block_size=int(get(raw, ("block_size", "block_length"), path, 4)), family="sdar", **_ids(sp),
    )


def build_fast_dllm_v2(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    return qwen_config(
        raw, path, qkv_bias=True, tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)), logits_shift=True,
        attention="block", block_size=int(get(raw, ("bd_size", "block_size"), path, 32)), family="fast_dllm_v2", **_ids(sp),
    )


SDAR = Family("sdar", ("SDARForCausalLM",), ("sdar",), build_sdar, skip_rotary)
FAST_DLLM_V2 = Family("fast_dllm_v2", ("Fast_dLLM_QwenForCausalLM",), ("Fast_dLLM_Qwen",), build_fast_dllm_v2, skip_rotary)
