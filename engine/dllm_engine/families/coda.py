"""CoDA (Salesforce/CoDA-v0-Instruct): Qwen3 names with per-head q_norm/k_norm,
no attention bias, shifted logits, bidirectional.

Its model class always builds a separate `lm_head`, so the head is untied even
where the config's default (`tie_word_embeddings`, true for Qwen3-1.7B) says otherwise.
"""

from __future__ import annotations

from pathlib import Path

from ..model_config import ModelConfig
from .spec import Family, qwen_config, refuse, skip_rotary
from .specials import SpecialTokens


def build(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    if raw.get("attention_bias"):
        refuse(path, "attention_bias", True, "CoDA has no attention bias; an o_proj bias is not implemented")
    mask = sp.require("mask", config_keys=("mask_token_id",), role="mask_token", texts=("<|mask|>",))
    eos = sp.require("EOS", config_keys=("eos_token_id",), role="eos_token", texts=("<|endoftext|>",))
    pad = sp.find(config_keys=("pad_token_id",), role="pad_token")
    pad = eos if pad is None else pad
    return qwen_config(
        raw, path, qk_norm=True, qkv_bias=False, tie_word_embeddings=False, logits_shift=True,
        attention="bidirectional", family="coda", mask_token_id=mask, pad_token_id=pad, eos_token_id=eos,
        extra={"infill": "masks", "end_ids": sp.end_ids(eos, pad)},
    )


FAMILY = Family("coda", ("CoDALanguageModel",), ("CoDA",), build, skip_rotary)
