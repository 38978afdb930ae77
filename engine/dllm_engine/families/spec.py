"""What a checkpoint family is: how to recognise it, read its config, rename its tensors.

A family is data (one `Family` row in `families.FAMILIES`), not a code branch:
the engine runs every family through the same `DiffusionTransformer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from ..model_config import CheckpointError, ModelConfig
from .specials import SpecialTokens

Renamer = Callable[[str], "str | None"]
# How a hole is laid out for this family (see infill_layout.py):
#   masks   prefix + [mask]*n + suffix, surplus slots become EOS (LLaDA, Dream, CoDA, Open-dCoder)
#   dlm_pad same, surplus slots become <|dlm_pad|> (DiffuCoder)
#   expand  DreamOn: a short canvas that grows ([expand] -> two masks) and shrinks (EOS deletes a slot)
#   block   block diffusion: prompt then canvas blocks, causal between blocks (SDAR, Fast-dLLM v2)
#   canvas  DiffusionGemma: encoded prompt, then canvases of canvas_length; uncommitted slots are noise
InfillKind = Literal["masks", "dlm_pad", "expand", "block", "canvas"]

_REQUIRED = object()


@dataclass(frozen=True)
class Family:
    name: str
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    build: Callable[[dict, Path, SpecialTokens], ModelConfig]
    rename: Renamer | None = None  # None: the checkpoint already uses our (Qwen2-style) names
    # A further check for families that share an architecture (Dream vs DiffuCoder vs DreamOn).
    accepts: Callable[[dict, SpecialTokens], bool] | None = None
    their_name: Callable[[str], str] | None = None  # inverse of rename, for error messages
    # A family that does not run through DiffusionTransformer brings its own loader:
    # (folder, ModelConfig, torch.device, torch.dtype) -> model (DiffusionGemma).
    loader: Callable | None = None

    def matches(self, raw: dict) -> bool:
        archs = {a.lower() for a in raw.get("architectures") or []}
        mtype = str(raw.get("model_type", "")).lower()
        return bool(archs & {a.lower() for a in self.architectures}) or mtype in {m.lower() for m in self.model_types}


def get(raw: dict, key: str | tuple[str, ...], path: Path, default=_REQUIRED):
    """config.json value under the first present key; a clear error naming the file and key if required."""
    keys = (key,) if isinstance(key, str) else key
    for k in keys:
        if raw.get(k) is not None:
            return raw[k]
    if default is _REQUIRED:
        raise CheckpointError(f"{path / 'config.json'}: missing key {keys[0]!r}")
    return default


def refuse(path: Path, key: str, value, why: str) -> None:
    raise CheckpointError(f"{path / 'config.json'}: {key}={value!r} is not supported ({why})")


def transformer_dims(cfg: dict, path: Path, max_positions: int) -> dict:
    """The Hugging Face transformer sizes every family names the same way."""
    heads = int(get(cfg, "num_attention_heads", path))
    return dict(
        vocab_size=int(get(cfg, "vocab_size", path)),
        hidden_size=int(get(cfg, "hidden_size", path)),
        num_layers=int(get(cfg, "num_hidden_layers", path)),
        num_heads=heads,
        num_kv_heads=int(get(cfg, "num_key_value_heads", path, heads)),
        intermediate_size=int(get(cfg, "intermediate_size", path)),
        head_dim=int(get(cfg, "head_dim", path, 0) or 0),
        rms_norm_eps=float(get(cfg, "rms_norm_eps", path, 1e-6)),
        max_position_embeddings=int(get(cfg, "max_position_embeddings", path, max_positions)),
    )


def qwen_config(raw: dict, path: Path, **options) -> ModelConfig:
    """The Qwen2/Qwen3 config keys (Dream, CoDA, SDAR, Fast-dLLM v2, Open-dCoder all use them)."""
    if raw.get("rope_scaling") not in (None, {}):
        refuse(path, "rope_scaling", raw["rope_scaling"], "only plain RoPE is implemented")
    if str(raw.get("hidden_act", "silu")) != "silu":
        refuse(path, "hidden_act", raw["hidden_act"], "the engine's MLP is SwiGLU")
    if raw.get("use_sliding_window"):
        refuse(path, "use_sliding_window", True, "sliding-window attention is not implemented")
    dims = dict(**transformer_dims(raw, path, max_positions=32768),
                rope_theta=float(get(raw, "rope_theta", path, 10000.0)))
    try:
        return ModelConfig(**dims, **options)
    except CheckpointError as exc:  # e.g. heads not dividing hidden_size
        raise CheckpointError(f"{path / 'config.json'}: {exc}") from None


def skip_rotary(name: str) -> str | None:
    """Qwen-style names are ours already; drop stored RoPE buffers (we recompute them)."""
    return None if name.endswith("rotary_emb.inv_freq") else name
