"""Positions and attention masks for full-sequence forwards of third-party families.

Convention (used by `dllm-lsp model logits`, the infill layouts and the tests):
- a row may carry padding (`valid` False), left or in the middle of a canvas;
  padding is never attended to as a key, and positions skip it: the first real
  token is position 0 and real tokens count up from there. So a left-padded
  row gives the same logits as the same tokens unpadded. (Dream's own
  generate does the same, `cumsum(attention_mask) - 1`; LLaDA's remote code
  keeps positions 0..S-1 including pads, so its padded rows differ from ours.)
- bidirectional: every real token sees every real token.
- block (SDAR, Fast-dLLM v2): block b = position // block_size; a token sees
  real tokens of its own and earlier blocks.
- rows of padding see themselves only (their logits are meaningless, never NaN).
"""

from __future__ import annotations

import torch

from ..model_config import ModelConfig


def positions_from_valid(valid: torch.Tensor) -> torch.Tensor:
    """[B, S] bool -> [B, S] long: 0, 1, 2, ... over real tokens; padding gets its neighbour's."""
    return (valid.long().cumsum(-1) - 1).clamp(min=0)


def full_mask(valid: torch.Tensor, positions: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """bool [B, 1, S, S], True = may attend (query row, key column)."""
    allowed = valid[:, None, :].expand(-1, valid.shape[1], -1)  # [B, S(q), S(k)]
    if cfg.attention == "block":
        block = positions // cfg.block_size
        allowed = allowed & (block[:, None, :] <= block[:, :, None])
    eye = torch.eye(valid.shape[1], dtype=torch.bool, device=valid.device)[None]
    return (allowed | eye)[:, None]


@torch.inference_mode()
def forward_logits(model, ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Raw logits [B, S, V] in the checkpoint's convention (no shift applied)."""
    positions = positions_from_valid(valid)
    logits, _ = model(ids, positions, full_mask(valid, positions, model.config))
    return logits
