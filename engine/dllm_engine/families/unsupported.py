"""Diffusion checkpoints we recognise but do not run yet, with the reason.

(DiffusionGemma runs through transformers' own class: see gemma.py.)
LLaDA-MoE / LLaDA2.0 need mixture-of-experts MLPs.
"""

from __future__ import annotations

from pathlib import Path

from ..model_config import CheckpointError

NOT_YET: dict[str, str] = {
    "lladamoe": "LLaDA-MoE needs mixture-of-experts MLPs, not implemented",
    "llada2moe": "LLaDA2.0 needs mixture-of-experts MLPs, not implemented",
    "sdar_moe": "SDAR-MoE needs mixture-of-experts MLPs, not implemented",
}


def check(raw: dict, path: Path) -> None:
    names = [*(raw.get("architectures") or []), str(raw.get("model_type", ""))]
    for name in names:
        key = name.lower().replace("forconditionalgeneration", "").replace("forcausallm", "").replace("modellm", "")
        for known, why in NOT_YET.items():
            if key.startswith(known):
                raise CheckpointError(f"{path / 'config.json'}: {name!r} recognised but not supported: {why}")
