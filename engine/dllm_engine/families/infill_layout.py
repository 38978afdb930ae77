"""Per-family infill layouts: where prefix, canvas and suffix sit in one sequence.

The engine's denoiser works on canvases [B, W] (slots past `canvas_lens[b]` are
padding). For third-party families the runner lays every row out as one full
sequence and reads the canvas slots' logits back:

- bidirectional (LLaDA, Dream, Dream-Coder, DiffuCoder, DreamOn, CoDA, Open-dCoder):
  `[left pad][prefix][canvas W][suffix][right pad]`, canvas columns aligned
  across rows (prefix left-padded to the longest), unused canvas slots are
  padding (positions skip them, so the suffix follows the last real slot).
- block (SDAR, Fast-dLLM v2): `[left pad][prefix][canvas W][right pad]`, the
  left pad a multiple of block_size so block boundaries are the same columns
  in every row. These models complete left to right: the suffix is not seen.
- shifted families (Dream, CoDA, Fast-dLLM v2, ...): slot j's logits come from
  the previous real column (for slot 0 the prefix's last token; with an empty
  prefix, the slot's own column, as Dream's `cat([logits[:, :1], logits[:, :-1]])`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import torch

from ..model_config import ModelConfig
from .attention import full_mask, positions_from_valid


@dataclass
class FamilyContext:
    """A hole's context for a family runner (what `ModelRunner.encode_context` returns for native)."""

    prefix_ids: list[int]
    suffix_ids: list[int]
    length: int
    reused: int = 0  # bidirectional contexts depend on the canvas: nothing is reusable across requests
    serial: int = field(default_factory=itertools.count().__next__)


@dataclass
class Rows:
    ids: torch.Tensor  # [B, S]
    valid: torch.Tensor  # [B, S] bool: real tokens (keys)
    positions: torch.Tensor  # [B, S]
    mask: torch.Tensor  # [B, 1, S, S]
    canvas_cols: torch.Tensor  # [B, W]: column of canvas slot j
    src_cols: torch.Tensor  # [B, W]: column whose logits predict slot j


def build_rows(cfg: ModelConfig, contexts: list[FamilyContext], canvases: torch.Tensor, canvas_lens: torch.Tensor) -> Rows:
    b, width = canvases.shape
    dev = canvases.device
    block = cfg.attention == "block"
    pre = [len(c.prefix_ids) for c in contexts]
    suf = [0 if block else len(c.suffix_ids) for c in contexts]
    p_max = max(pre)
    if block:  # first real column a multiple of block_size in every row
        bs = cfg.block_size
        starts = [((p_max - p) // bs) * bs for p in pre]
    else:
        starts = [p_max - p for p in pre]
    canvas_start = [s + p for s, p in zip(starts, pre)]
    total = max(c + width + s for c, s in zip(canvas_start, suf))
    fill = cfg.pad_token_id if cfg.pad_token_id >= 0 else cfg.eos_token_id
    ids = torch.full((b, total), fill, dtype=torch.long)
    valid = torch.zeros(b, total, dtype=torch.bool)
    lens = canvas_lens.tolist()
    for row, ctx in enumerate(contexts):  # host-side assembly of a few hundred ints per row
        s, c = starts[row], canvas_start[row]
        ids[row, s:c] = torch.tensor(ctx.prefix_ids, dtype=torch.long)
        valid[row, s:c] = True
        valid[row, c:c + lens[row]] = True
        if suf[row]:
            ids[row, c + width:c + width + suf[row]] = torch.tensor(ctx.suffix_ids, dtype=torch.long)
            valid[row, c + width:c + width + suf[row]] = True
    ids, valid = ids.to(dev), valid.to(dev)
    canvas_cols = torch.tensor(canvas_start, device=dev)[:, None] + torch.arange(width, device=dev)[None]
    ids.scatter_(1, canvas_cols, canvases)
    positions = positions_from_valid(valid)
    src = canvas_cols
    if cfg.logits_shift:
        src = canvas_cols - 1
        no_prefix = torch.tensor([p == 0 for p in pre], device=dev)
        src[:, 0] = torch.where(no_prefix, canvas_cols[:, 0], src[:, 0])
    return Rows(ids, valid, positions, full_mask(valid, positions, cfg), canvas_cols, src)


def current_block_start(cfg: ModelConfig, rows: Rows, masked: torch.Tensor) -> torch.Tensor:
    """[B] column where each row's first block with a masked slot starts (S for finished rows)."""
    big = rows.ids.shape[1]
    first = torch.where(masked, rows.canvas_cols, torch.full_like(rows.canvas_cols, big)).min(-1).values
    return torch.where(first < big, first // cfg.block_size * cfg.block_size, first)


def dreamon_edit(canvas: list[int], committed_now: list[bool], cfg: ModelConfig, max_len: int) -> list[int]:
    """DreamOn's length edits after a pass, for one canvas (the engine applies it per row, so
    it batches where the official code runs one sequence at a time):
    - a committed `[expand]` becomes two masks (while the canvas is below `max_len`, else one mask);
    - a committed EOS deletes its slot, and the still-masked slots to its right go with it
      (DreamOn's pad-EOS-to-the-right then delete-EOS rule).
    """
    mask, eos, expand = cfg.mask_token_id, cfg.eos_token_id, cfg.extra["expand_token_id"]
    out: list[int] = []
    deleting = False
    grow = max_len - len(canvas)
    for tok, now in zip(canvas, committed_now):
        if now and tok == eos:
            deleting = True
            continue
        if deleting and tok == mask:
            continue
        if now and tok == expand:
            out.extend([mask, mask] if grow > 0 else [mask])
            grow -= 1
            continue
        out.append(tok)
    return out
