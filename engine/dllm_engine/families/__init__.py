"""Third-party checkpoint families mapped onto the engine's one ModelConfig.

`FAMILIES` is the table: each row recognises its checkpoints from `config.json`
(`architectures`, `model_type`, and for look-alikes the tokenizer), builds a
ModelConfig and renames tensors onto the Qwen2-style names of `dllm_engine.model`.
DiffusionGemma is the exception that runs through transformers' own class
(its row names a `loader`; see gemma.py). Order matters only among rows that share an architecture (DreamOn and
DiffuCoder before plain Dream).
"""

from __future__ import annotations

from pathlib import Path

from ..model_config import CheckpointError, ModelConfig
from . import block, coda, dream, gemma, llada, unsupported
from .spec import Family, Renamer
from .specials import SpecialTokens

FAMILIES: tuple[Family, ...] = (
    llada.FAMILY,
    dream.DREAMON,
    dream.DIFFUCODER,
    dream.DREAM,
    dream.OPEN_DCODER,
    coda.FAMILY,
    block.SDAR,
    block.FAST_DLLM_V2,
    gemma.FAMILY,
)
BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}


def detect(raw: dict, path: Path, specials: SpecialTokens | None = None) -> Family:
    unsupported.check(raw, path)
    sp = specials or SpecialTokens(path, raw)
    candidates = [f for f in FAMILIES if f.matches(raw)]
    for fam in candidates:
        if fam.accepts is None or fam.accepts(raw, sp):
            return fam
    arch = (raw.get("architectures") or [raw.get("model_type", "?")])[0]
    if candidates:  # e.g. a Qwen2ForCausalLM without any mask token: an autoregressive model
        raise CheckpointError(f"{path / 'config.json'}: {arch!r} checkpoint has no mask token, so it is not a diffusion model the engine can run")
    known = ", ".join(a for f in FAMILIES for a in f.architectures)
    raise CheckpointError(f"{path / 'config.json'}: unsupported architecture {arch!r} (supported: {known})")


def config_from_hf(raw: dict, path: Path, logits_only: bool = False) -> ModelConfig:
    sp = SpecialTokens(path, raw, placeholder_missing=logits_only)
    fam = detect(raw, path, sp)
    cfg = fam.build(raw, path, sp)
    if sp.unresolved:
        cfg.extra["unresolved_special_ids"] = sorted(sp.unresolved)
    return cfg


def renamer_for(raw: dict, cfg: ModelConfig) -> Renamer | None:
    fam = BY_NAME.get(cfg.family)
    return fam.rename if fam else None


def their_name_for(cfg: ModelConfig):
    fam = BY_NAME.get(cfg.family)
    return fam.their_name if fam else None


def loader_for(cfg: ModelConfig):
    """The family's own loader (None: build the engine's DiffusionTransformer)."""
    fam = BY_NAME.get(cfg.family)
    return fam.loader if fam else None
