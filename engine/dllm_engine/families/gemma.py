"""DiffusionGemma (google/diffusiongemma-*): detection, config, special ids.

`config.json` is transformers' `DiffusionGemmaConfig`: architectures
`DiffusionGemmaForBlockDiffusion`, model_type `diffusion_gemma`, the text model's
keys under `text_config` (its pad/eos/bos ids too), a `vision_config`, and
`canvas_length` (the block the decoder denoises at once; 256 in transformers).
The model runs through transformers' class (`gemma_model.py`); the ModelConfig
built here carries what the engine needs: sizes, special ids, the canvas length
as `block_size`, and the self-conditioning temperature.

Length convention (transformers' `generate`): the prompt is encoded, then
canvases of `canvas_length` follow left to right, each appended to the encoded
prompt once finished; the suffix is not seen (as for block diffusion). The
model has no mask token: a slot not yet committed is uniform noise. The engine
still needs an id for "not committed"; we use the tokenizer's `<mask>` (Gemma's
vocabulary has one; `<unk>` otherwise) and the runner never feeds it to the model.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..model_config import CheckpointError, ModelConfig
from .spec import Family, transformer_dims
from .specials import SpecialTokens

# transformers' DiffusionGemmaGenerationConfig._get_default_generation_params: the temperature
# schedule goes t_max -> t_min; self-conditioning reads the temperature-scaled logits, and greedy
# decoding sits at the cold end of that schedule.
T_MIN_DEFAULT = 0.4
CANVAS_LENGTH_DEFAULT = 256  # DiffusionGemmaConfig.canvas_length


def _generation_t_min(path: Path) -> float:
    try:
        gen = json.loads((path / "generation_config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return T_MIN_DEFAULT
    value = gen.get("t_min") if isinstance(gen, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else T_MIN_DEFAULT


def build(raw: dict, path: Path, sp: SpecialTokens) -> ModelConfig:
    text = raw.get("text_config")
    if not isinstance(text, dict):
        raise CheckpointError(f"{path / 'config.json'}: missing key 'text_config'")
    # Special ids live in text_config; a top-level key (if any) wins.
    ids = SpecialTokens(path, {**text, **{k: v for k, v in raw.items() if k.endswith("_token_id")}},
                        placeholder_missing=sp.placeholder_missing)
    eos = ids.require("EOS", config_keys=("eos_token_id",), role="eos_token", texts=("<eos>",))
    pad = ids.find(config_keys=("pad_token_id",), role="pad_token", texts=("<pad>",))
    bos = ids.find(config_keys=("bos_token_id",), role="bos_token", texts=("<bos>",))
    placeholder = ids.require("mask (placeholder for uncommitted slots)", role="mask_token",
                              texts=("<mask>", "[MASK]", "<unk>"))
    sp.unresolved |= ids.unresolved
    canvas = int(raw.get("canvas_length") or CANVAS_LENGTH_DEFAULT)
    try:
        return ModelConfig(
            **transformer_dims(text, path, max_positions=131072),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", True)),
            logits_shift=False,
            attention="encoder_decoder",
            block_size=canvas,
            family="diffusion_gemma",
            mask_token_id=placeholder,
            eos_token_id=eos,
            pad_token_id=eos if pad is None else pad,
            extra={
                "infill": "canvas",
                "bos_token_id": bos,
                "end_ids": ids.end_ids(eos, ids.find(texts=("<end_of_turn>",))),
                "self_conditioning_temperature": _generation_t_min(path),
                "sliding_window": text.get("sliding_window"),
                "num_experts": text.get("num_experts"),
            },
        )
    except CheckpointError as exc:
        raise CheckpointError(f"{path / 'config.json'}: {exc}") from None


def _load(path, cfg, device, dtype):
    from .gemma_model import load_diffusion_gemma  # imports transformers only for this family

    return load_diffusion_gemma(path, cfg, device, dtype)


FAMILY = Family("diffusion_gemma", ("DiffusionGemmaForBlockDiffusion",), ("diffusion_gemma",), build, loader=_load)
