"""The Dream family (Qwen2 layout with q/k/v bias, shifted logits, bidirectional):
Dream-v0, Dream-Coder (same layout as Dream), DiffuCoder (`<|dlm_pad|>` pads the
canvas), DreamOn (variable-length canvas: `[expand]` and delete-by-EOS) and
Open-dCoder (a Qwen2ForCausalLM config whose checkpoint carries a mask token).

They share `DreamModel`; the tokenizer tells DiffuCoder and DreamOn apart.
"""

from __future__ import annotations

from pathlib import Path

from ..model_config import ModelConfig
from .spec import Family, qwen_config, skip_rotary
from .specials import SpecialTokens

MASK_TEXTS = ("<|mask|>", "<|MASK|>", "<mask>", "[MASK]", "<M>")
EOS_TEXTS = ("<|endoftext|>",)
DLM_PAD_TEXTS = ("<|dlm_pad|>",)
EXPAND_TEXTS = ("<|expand|>", "<|dlm_expand|>", "[expand]")


def _ids(sp: SpecialTokens) -> tuple[int, int, int]:
    mask = sp.require("mask", config_keys=("mask_token_id",), role="mask_token", texts=MASK_TEXTS)
    eos = sp.require("EOS", config_keys=("eos_token_id",), role="eos_token", texts=EOS_TEXTS)
    pad = sp.find(config_keys=("pad_token_id",), role="pad_token")
    return mask, eos, eos if pad is None else pad


def _config(raw: dict, path: Path, sp: SpecialTokens, family: str, infill: str, pad=None, **extra) -> ModelConfig:
    mask, eos, default_pad = _ids(sp)
    pad = default_pad if pad is None else pad
    return qwen_config(
        raw, path,
        qkv_bias=bool(raw.get("attention_bias", True)),  # Qwen2 always carries q/k/v bias
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        logits_shift=True,
        attention="bidirectional",
        family=family,
        mask_token_id=mask,
        pad_token_id=pad,
        eos_token_id=eos,
        extra={"infill": infill, "end_ids": sp.end_ids(eos, pad), **extra},
    )


def build_dream(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    return _config(raw, path, sp, "dream", "masks")


def build_diffucoder(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    # Surplus canvas slots are trained to become <|dlm_pad|>, which is also the pad id.
    dlm_pad = sp.require("<|dlm_pad|>", texts=DLM_PAD_TEXTS)
    return _config(raw, path, sp, "diffucoder", "dlm_pad", pad=dlm_pad)


def build_dreamon(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    expand = sp.require("[expand]", config_keys=("expand_token_id",), texts=EXPAND_TEXTS)
    # DreamOn deletes a slot when EOS is committed inside the span.
    return _config(raw, path, sp, "dreamon", "expand", expand_token_id=expand)


def build_open_dcoder(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    return _config(raw, path, sp, "open_dcoder", "masks")


def _has_dlm_pad(raw: dict, sp: SpecialTokens) -> bool:
    return sp.find(texts=DLM_PAD_TEXTS) is not None


def _has_expand(raw: dict, sp: SpecialTokens) -> bool:
    return sp.find(config_keys=("expand_token_id",), texts=EXPAND_TEXTS) is not None


def _plain_dream(raw: dict, sp: SpecialTokens) -> bool:
    return not _has_dlm_pad(raw, sp) and not _has_expand(raw, sp)


def _has_mask(raw: dict, sp: SpecialTokens) -> bool:
    # A Qwen2ForCausalLM config is a diffusion checkpoint only if it names a mask token.
    return sp.find(config_keys=("mask_token_id",), role="mask_token", texts=MASK_TEXTS) is not None


_DREAM = (("DreamModel",), ("Dream",))
DREAMON = Family("dreamon", *_DREAM, build_dreamon, skip_rotary, accepts=_has_expand)
DIFFUCODER = Family("diffucoder", *_DREAM, build_diffucoder, skip_rotary, accepts=_has_dlm_pad)
DREAM = Family("dream", *_DREAM, build_dream, skip_rotary, accepts=_plain_dream)
OPEN_DCODER = Family("open_dcoder", ("Qwen2ForCausalLM",), ("qwen2",), build_open_dcoder, skip_rotary, accepts=_has_mask)
