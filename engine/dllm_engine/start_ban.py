"""`Hole.banned_starts`: a fill may not begin (after blank text) with any of these strings.

Why: at a new function's empty body the default model starts 28 of 60 fills with a docstring
it invents (bench_block_stop.py --kind body, eighteenth session): prose that never matches the
real one, loops, and takes 1-1.2 s p50 against ~0.6 s for a fill that starts with code. The
language server asks for code there (its `emptyBody` setting) by banning a comment's and a
docstring's start (benchmarks/RESULTS.md, nineteenth session).

The rule, at every pass: a masked slot whose committed slots before it are all blank tokens
may not take a token whose text, blanks stripped off its start, begins with a banned string.
With blocks of 1 that is the current slot; a whole-canvas decoder bans it at every masked slot
that nothing but blanks precede, so whichever slot turns out first cannot start with one. A
slot checked after draft tokens is banned the same way, reading the drafts before it as its
text (they are what its logits were computed after). A token that is only the start of a
banned string (a lone `r` before `"`) is not banned: a name `r` is code, and a raw docstring is
rare. Re-masking can reorder what came first, so the finished fill is checked once more
(`starts_banned`) and returned empty if it still begins with a banned string.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

BLANKS = " \t\r\n"
MAX_CACHED = 32  # banned-start sets whose token masks are kept (one bool [V] each)


def starts_banned(text: str, starts: tuple[str, ...]) -> bool:
    return bool(starts) and text.lstrip(BLANKS).startswith(starts)


class StartBans:
    """The token masks behind `Hole.banned_starts`, computed once per set of strings."""

    def __init__(self, texts: list[str], vocab_size: int, device) -> None:
        """`texts`: what each token writes (the healer's list: decoded once), for the first
        len(texts) ids of the model's `vocab_size` (ids past them are never written)."""
        self._texts = [t.lstrip(BLANKS) for t in texts[:vocab_size]]
        self._vocab = vocab_size
        self._device = device
        self._blank: torch.Tensor | None = None
        self._cache: OrderedDict[tuple[str, ...], torch.Tensor] = OrderedDict()

    def _mask(self, rule) -> torch.Tensor:
        mask = torch.zeros(self._vocab, dtype=torch.bool)
        mask[: len(self._texts)] = torch.tensor([rule(t) for t in self._texts], dtype=torch.bool)
        return mask.to(self._device)

    @property
    def blank(self) -> torch.Tensor:
        """bool [V]: tokens whose text is blank (or empty: special tokens)."""
        if self._blank is None:
            self._blank = self._mask(lambda t: not t)
        return self._blank

    def vocab(self, starts: tuple[str, ...]) -> torch.Tensor:
        """bool [V]: tokens whose text, blanks stripped off its start, begins with one of `starts`."""
        mask = self._cache.get(starts)
        if mask is None:
            mask = self._mask(lambda t: t.startswith(starts))
            if len(self._cache) >= MAX_CACHED:
                self._cache.popitem(last=False)
            self._cache[starts] = mask
        self._cache.move_to_end(starts)
        return mask

    @property
    def vocab_size(self) -> int:
        return self._vocab

    def all_blank(self, tokens: torch.Tensor) -> bool:
        """Whether every one of `tokens` (committed ids) writes only blanks."""
        return not bool((~self.blank[tokens.clamp(min=0, max=self._vocab - 1)]).any())

    def _text(self, canvas: torch.Tensor, mask_id: int) -> torch.Tensor:
        """bool, canvas-shaped: the slots holding a token that writes something not blank."""
        return (canvas != mask_id) & ~self.blank[canvas.clamp(min=0, max=self._vocab - 1)]

    def live(self, canvas: torch.Tensor, mask_id: int) -> bool:
        """Whether the ban can still matter: some masked slot has nothing but blanks before it
        (a whole-canvas decoder may commit a later slot's text first)."""
        masked = canvas == mask_id
        if not bool(masked.any()):
            return False
        text = self._text(canvas, mask_id)
        return not bool(text.any()) or int(text.nonzero()[0]) > int(masked.nonzero()[0])

    def apply(self, logits: torch.Tensor, canvases: torch.Tensor, slots: torch.Tensor, mask_id: int,
              bans: dict[int, torch.Tensor], compact: bool) -> None:
        """Ban, in place, each banned row's tokens at its `slots` that only blanks precede.
        `canvases`: [B, L] as the logits saw them (masks, committed tokens, drafts); `slots`:
        bool [B, L], the slots the logits hold: `logits` is [M, V] over them row by row when
        `compact`, else [B, L, V]; `bans`: canvas row -> bool [V]."""
        rows = torch.tensor(sorted(bans), device=canvases.device)
        text = self._text(canvases[rows], mask_id)  # [R, L]
        before = text.int().cumsum(-1) - text.int()  # slots holding text before each slot
        where = torch.zeros_like(slots)
        where[rows] = slots[rows] & (before == 0)
        vocab = torch.zeros((canvases.shape[0], self._vocab), dtype=torch.bool, device=canvases.device)
        vocab[rows] = torch.stack([bans[r] for r in sorted(bans)])
        with torch.inference_mode():  # logits are an inference tensor: edit in place, no copy
            if compact:  # the compact rows are the slots, canvas by canvas
                at = where[slots]
                owner = slots.nonzero(as_tuple=True)[0][at]
                logits[at] = logits[at].masked_fill(vocab[owner, : logits.shape[-1]], float("-inf"))
            else:
                b, s = where.nonzero(as_tuple=True)
                logits[b, s] = logits[b, s].masked_fill(vocab[b, : logits.shape[-1]], float("-inf"))
