"""What happens to one canvas after a pass: end, stop, grow, re-mask, read out.

Pure functions over one canvas (a 1-D tensor of token ids) and the special ids;
the engine loop calls them per hole after the batched commit.
"""

from __future__ import annotations

import torch

from .denoise import SpecialIds
from .scheduler import ActiveHole
from .tokenizer import TextTokenizer


def advance(a: ActiveHole, special: SpecialIds, ahead: int = 0) -> str | None:
    """End at the first end token, grow a full canvas, or keep going. Returns a finish reason.
    `ahead`: grow the canvas as soon as fewer than `ahead` + 1 masked slots are left, not only
    once it is full (blocks of 1 with drafts: a draft of `ahead` tokens needs a slot after
    it, and a pass runs only the rows it needs, so the canvas's length costs nothing)."""
    if a.stop_ids is not None:
        stops = stop_slots(a, special)
        if stops.any():
            # Nothing after a committed stop token is part of the fill: end the canvas there.
            a.canvas[int(stops.nonzero()[0]) + 1:] = special.end[0]
    is_end = torch.zeros_like(a.canvas, dtype=torch.bool)
    for end_id in special.end:
        is_end |= a.canvas == end_id
    if is_end.any():
        first = int(is_end.nonzero()[0])
        before = a.canvas[:first]
        if not (before == special.mask).any():
            a.canvas = before.clone()
            return "end"
        a.canvas[first + 1:] = special.end[0]  # everything after the end is padding
    left = int((a.canvas == special.mask).sum())
    n = a.canvas.numel()
    if left and (left > ahead or is_end.any() or n >= a.max_tokens):
        return None
    if is_end.any():
        return "end"
    if n >= a.max_tokens:
        return "max_tokens"
    grow = min(n, a.max_tokens - n)  # double, up to max_tokens
    tail = torch.full((grow,), special.mask, dtype=a.canvas.dtype, device=a.canvas.device)
    a.canvas = torch.cat((a.canvas, tail))
    return None


def stop_slots(a: ActiveHole, special: SpecialIds, canvas: torch.Tensor | None = None) -> torch.Tensor:
    """bool [L]: the committed slots holding a stop token (slot 0 of a healed hole by its own
    table: the backed-up text is not the fill's), of `canvas` (default: the hole's own). Needs
    `a.stop_ids`."""
    canvas = a.canvas if canvas is None else canvas
    stops = a.stop_ids[canvas.clamp(min=0)] & (canvas != special.mask)
    if a.first_stop_ids is not None and canvas.numel():
        stops[0] = bool(a.first_stop_ids[canvas[0].clamp(min=0)]) and int(canvas[0]) != special.mask
    return stops


def forget_rewritten(a: ActiveHole, before: torch.Tensor) -> None:
    """The delayed canvas cache after advance(): a slot whose token advance() rewrote
    (padding after an end or a stop) no longer matches its kept K/V, so it is recomputed;
    a canvas that grew or shrank is recomputed whole. `before`: the canvas advance() got."""
    if a.frozen is None:
        return
    if a.canvas.numel() != before.numel():
        a.frozen = a.canvas_kv = None
    else:
        a.frozen = a.frozen & (a.canvas == before)


def remask(a: ActiveHole, special: SpecialIds, token_prob: torch.Tensor, just_committed: torch.Tensor) -> None:
    """Re-mask earlier commits the model now doubts (never this pass's, never past the end)."""
    n = a.canvas.numel()
    committed = (a.canvas != special.mask) & ~just_committed[:n]
    for end_id in special.end:
        committed &= a.canvas != end_id
    doubtful = committed & (token_prob[:n] < a.params.remask_below)
    idx = doubtful.nonzero().squeeze(-1)[: a.remask_budget]
    if idx.numel():
        a.canvas[idx] = special.mask
        a.remask_budget -= idx.numel()


def fill_tokens(a: ActiveHole, special: SpecialIds) -> list[int]:
    """The committed tokens of the fill: up to the first mask or end token."""
    out = []
    for t in a.canvas.tolist():
        if t == special.mask or t in special.end:
            break
        out.append(t)
    return out


def stop_token_mask(stop: tuple[str, ...], tokenizer: TextTokenizer, vocab: int, special: SpecialIds,
                    device: torch.device, leading: bool = False) -> torch.Tensor:
    """bool [V]: the tokens whose text holds a stop string (`leading`: begins with one, so
    the fill's text before the stop is the same whichever of them ends it)."""
    def hit(text: str) -> bool:
        return any(text.startswith(s) if leading else s in text for s in stop)

    hits = [i for i in range(min(vocab, tokenizer.vocab_size)) if hit(tokenizer.decode([i]))]
    mask = torch.zeros(vocab, dtype=torch.bool, device=device)
    mask[hits] = True
    mask[list(special.end)] = False
    return mask
