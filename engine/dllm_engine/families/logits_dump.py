"""The engine side of `dllm-lsp model logits`: one forward, raw logits to safetensors.

Kept here (not in the command module) because dllm_lsp never imports torch.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from ..checkpoint import load
from .attention import forward_logits

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class LogitsInputError(ValueError):
    """Token ids the checkpoint cannot take (the command reports it as bad input)."""


def dump_logits(model: str, ids: list[list[int]], mask: list[list[int]] | None, out: Path,
                device: str = "cpu", dtype: str = "float32") -> str:
    """Write {'logits': float32 [N, S, V]}; returns a one-line summary. Raises CheckpointError / LogitsInputError."""
    loaded = load(model, device=device, dtype=DTYPES[dtype], logits_only=True)
    vocab = loaded.config.vocab_size
    bad = [v for r in ids for v in r if not 0 <= v < vocab]
    if bad:
        raise LogitsInputError(f"token id {bad[0]} outside the vocabulary [0, {vocab})")
    ids_t = torch.tensor(ids, dtype=torch.long, device=device)
    valid = torch.tensor(mask, dtype=torch.bool, device=device) if mask else torch.ones_like(ids_t, dtype=torch.bool)
    own = getattr(loaded.model, "forward_logits", None)  # a family with its own forward (DiffusionGemma)
    try:
        logits = (own(ids_t, valid) if own else forward_logits(loaded.model, ids_t, valid)).float().cpu().contiguous()
    except ValueError as exc:  # e.g. DiffusionGemma: padding inside the canvas part
        raise LogitsInputError(str(exc)) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    cfg = loaded.config
    save_file({"logits": logits}, str(out), metadata={"model": loaded.name, "family": cfg.family,
                                                      "logits_shift": str(cfg.logits_shift).lower()})
    kind = "shifted" if cfg.logits_shift else "same-position"
    return f"wrote {out}: logits {list(logits.shape)} ({cfg.family}, {kind} logits)"
