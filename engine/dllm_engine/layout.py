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


def block_of_rows(width: int, block: int, device: torch.device) -> torch.Tensor:
    """long [1 + width]: the decoding block of each row of a shifted canvas pass, whose
    row 0 is the context's last token (block -1: it sees the context alone, so its logits
    are the base's own next-token head) and row 1 + j is canvas slot j. `block` 0: one block."""
    slots = torch.arange(width, device=device) // (block or max(width, 1))
    return torch.cat((torch.full((1,), -1, device=device, dtype=slots.dtype), slots))


def shifted_canvas_mask(context_lens: torch.Tensor, t_max: int, canvas_lens: torch.Tensor,
                        width: int, block: int) -> torch.Tensor:
    """bool [B, 1, 1+W, Tmax+1+W] for a shifted canvas pass (rows: the context's last token,
    then the W canvas slots): every row sees its own context; among the pass's rows, a row
    sees the rows of its own block and of earlier blocks (causal between blocks,
    bidirectional inside one), and never a padding slot past canvas_lens[b]."""
    dev = context_lens.device
    ctx_ok = torch.arange(t_max, device=dev)[None] < context_lens[:, None]  # [B, Tmax]
    blk = block_of_rows(width, block, dev)
    sees = blk[None, :] <= blk[:, None]  # [1+W, 1+W]
    real = torch.arange(1 + width, device=dev)[None] <= canvas_lens[:, None]  # [B, 1+W]: row 0 always
    canvas_ok = sees[None] & real[:, None, :]  # [B, 1+W, 1+W]
    rows = torch.cat((ctx_ok[:, None, :].expand(-1, 1 + width, -1), canvas_ok), dim=-1)
    return rows[:, None]


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
