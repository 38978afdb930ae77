"""Token layouts and attention masks for the native architecture.

Native layout (architecture.md): the context is `<suf> suffix <pre> prefix`,
encoded causally; the canvas follows at the next positions and attends to all
context and bidirectionally to itself; context never attends to the canvas.
Because typing at the cursor only appends to the prefix, i.e. to the end of the
context sequence, the context KV cache is exact and reusable by token prefix.
"""

from __future__ import annotations

import torch

from .model_config import ModelConfig


def native_context_ids(prefix_ids: list[int], suffix_ids: list[int], cfg: ModelConfig) -> list[int]:
    bos = [cfg.bos_token_id] if cfg.bos_token_id >= 0 else []
    return [*bos, cfg.suffix_token_id, *suffix_ids, cfg.prefix_token_id, *prefix_ids]


def shifted_canvas_mask(context_lens: torch.Tensor, t_max: int, blocks: torch.Tensor,
                        real: torch.Tensor) -> torch.Tensor:
    """bool [B, 1, R, Tmax+R] for the R rows of a shifted canvas pass (block_decoding.py):
    every row sees its own context; among the pass's rows, row r sees row c when
    blocks[b, c] <= blocks[b, r] (causal between blocks, bidirectional inside one) and
    `real[b, c]` (never a padding row)."""
    dev = context_lens.device
    rows = blocks.shape[1]
    ctx_ok = torch.arange(t_max, device=dev)[None] < context_lens[:, None]  # [B, Tmax]
    sees = (blocks[:, None, :] <= blocks[:, :, None]) & real[:, None, :]  # [B, R, R]
    out = torch.cat((ctx_ok[:, None, :].expand(-1, rows, -1), sees), dim=-1)
    return out[:, None]


def causal_mask(past_len: int, new_len: int, device: torch.device) -> torch.Tensor:
    """bool [1, 1, new, past+new]: new token i sees all past tokens and new tokens <= i."""
    rows = torch.arange(new_len, device=device)[:, None]
    cols = torch.arange(past_len + new_len, device=device)[None, :]
    return (cols <= rows + past_len)[None, None]


def canvas_mask(context_lens: torch.Tensor, t_max: int, canvas_len: int) -> torch.Tensor:
    """bool [B, 1, L, Tmax+L]: each canvas row sees its own (unpadded) context and the whole canvas."""
    cols = torch.arange(t_max, device=context_lens.device)[None, :]
    ctx_ok = cols < context_lens[:, None]  # [B, Tmax]
    canvas_ok = torch.ones(context_lens.shape[0], canvas_len, dtype=torch.bool, device=context_lens.device)
    row = torch.cat((ctx_ok, canvas_ok), dim=1)  # [B, Tmax+L]
    return row[:, None, None, :].expand(-1, 1, canvas_len, -1)


def training_mask(context_len: torch.Tensor, total_len: int) -> torch.Tensor:
    """bool [B, 1, S, S] for one sequence per row laid out as [pad..., context, canvas]:

    rows of the context are causal over the context; canvas rows (the last
    `total_len - context_end` positions) see the context and the whole canvas.
    `context_len` [B] gives each row's first canvas index.
    """
    idx = torch.arange(total_len, device=context_len.device)
    rows, cols = idx[:, None], idx[None, :]
    start = context_len[:, None, None]
    is_canvas_row = rows[None] >= start
    causal = cols[None] <= rows[None]
    ctx_col = cols[None] < start
    return (torch.where(is_canvas_row, torch.ones_like(causal), causal & ctx_col))[:, None]
