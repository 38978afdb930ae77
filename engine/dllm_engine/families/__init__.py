"""Third-party checkpoint families mapped onto the engine's one ModelConfig.

Each family is detected from `config.json` (`architectures`, `model_type`) and
provides a ModelConfig plus a tensor renamer onto the Qwen2-style names of
`dllm_engine.model`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..model_config import CheckpointError, ModelConfig

Renamer = Callable[[str], "str | None"]


def config_from_hf(raw: dict, path: Path) -> ModelConfig:
    arch = raw.get("architectures") or [raw.get("model_type", "?")]
    raise CheckpointError(f"{path / 'config.json'}: unsupported architecture {arch[0]!r}")


def renamer_for(raw: dict, cfg: ModelConfig) -> Renamer | None:
    return None
