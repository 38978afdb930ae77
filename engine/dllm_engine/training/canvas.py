"""Training examples in the engine's canvas convention, and batches of them.

Context: `<suf> suffix <pre> prefix`, causal, positions 0..T-1. Canvas: L slots
at positions T..T+L-1, bidirectional over context and canvas. A hole of n
tokens in a canvas of L: n < L gives the n tokens then `<pad>` to L (the first
pad is the end of the fill); n >= L gives the first L tokens and no pad (the
engine grows the canvas and continues).

A batch shares one canvas length; contexts are left-padded to the longest one,
and pad slots are cut out of attention (they attend only to themselves, so no
row is empty) and out of every loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .holes import HoleSampler, committed_head
from .token_data import TokenCorpus

IGNORE = -100


@dataclass
class SpecialIds:
    pad: int
    mask: int
    suffix: int
    prefix: int


@dataclass
class Example:
    context: np.ndarray  # <suf> suffix <pre> prefix
    canvas: np.ndarray  # L target tokens: hole head, then pads if the hole is shorter
    hole_len: int
    kind: str
    head: int = 0  # leading canvas slots already committed (never masked)


def build_canvas(hole: np.ndarray, canvas_len: int, pad_id: int) -> np.ndarray:
    if len(hole) >= canvas_len:
        return np.asarray(hole[:canvas_len], dtype=np.int64)
    out = np.full(canvas_len, pad_id, dtype=np.int64)
    out[:len(hole)] = hole
    return out


def build_context(prefix: np.ndarray, suffix: np.ndarray, ids: SpecialIds) -> np.ndarray:
    return np.concatenate(([ids.suffix], suffix, [ids.prefix], prefix)).astype(np.int64)


def split_budget(rng: np.random.Generator, budget: int, before: int, after: int) -> tuple[int, int]:
    """Token counts (prefix, suffix) to keep; editors send more prefix than suffix, sometimes no suffix."""
    if rng.random() < 0.1:
        return min(before, budget), 0
    want_prefix = int(budget * rng.uniform(0.5, 0.9))
    take_prefix = min(before, want_prefix)
    take_suffix = min(after, budget - take_prefix)
    take_prefix = min(before, budget - take_suffix)  # give unused suffix budget back to the prefix
    return take_prefix, take_suffix


def sample_example(rng: np.random.Generator, corpus: TokenCorpus, sampler: HoleSampler, ids: SpecialIds,
                   mode: str, canvas_len: int, context_budget: int, file_p: np.ndarray) -> Example:
    fidx = int(rng.choice(corpus.num_files, p=file_p))
    f = corpus.file(fidx)
    span = sampler.sample(rng, f, mode, canvas_len)
    hole = np.asarray(f[span.start:span.end], dtype=np.int64)
    budget = context_budget if rng.random() < 0.5 else int(rng.integers(16, context_budget + 1))
    n_pre, n_suf = split_budget(rng, budget, span.start, len(f) - span.end)
    prefix = np.asarray(f[span.start - n_pre:span.start], dtype=np.int64)
    suffix = np.asarray(f[span.end:span.end + n_suf], dtype=np.int64)
    return Example(build_context(prefix, suffix, ids), build_canvas(hole, canvas_len, ids.pad), len(hole), span.kind,
                   committed_head(mode, canvas_len))


@dataclass
class Batch:
    context_ids: torch.Tensor  # [B, T] left-padded
    canvas: torch.Tensor  # [B, L] clean targets
    positions: torch.Tensor  # [B, T+L]
    context_lens: torch.Tensor  # [B]
    heads: torch.Tensor  # [B] committed canvas head per row (never masked)
    next_targets: torch.Tensor  # [B, T] next-token targets for context slots, IGNORE on pads
    mask: torch.Tensor | None = None  # bool [B, 1, T+L, T+L], True = may attend (built on the device)

    def to(self, device: torch.device) -> "Batch":
        moved = Batch(*(getattr(self, f).to(device, non_blocking=True) for f in
                        ("context_ids", "canvas", "positions", "context_lens", "heads", "next_targets")))
        moved.mask = attention_mask(moved.context_lens, self.context_ids.shape[1], self.canvas.shape[1])
        return moved

    @property
    def num_tokens(self) -> int:
        return int(self.context_lens.sum()) + self.canvas.numel()


def attention_mask(context_lens: torch.Tensor, t_max: int, canvas_len: int) -> torch.Tensor:
    """bool [B, 1, S, S] for rows laid out [left pads, context, canvas] (S = t_max + canvas_len)."""
    s = t_max + canvas_len
    idx = torch.arange(s, device=context_lens.device)
    first_ctx = (t_max - context_lens)[:, None]  # [B, 1]
    is_ctx = (idx[None] >= first_ctx) & (idx[None] < t_max)  # [B, S]
    is_canvas = (idx >= t_max)[None].expand_as(is_ctx)
    causal = idx[None, :] <= idx[:, None]  # [S(rows), S(cols)]
    ctx_rows = is_ctx[:, :, None] & is_ctx[:, None, :] & causal[None]
    canvas_rows = is_canvas[:, :, None] & (is_ctx | is_canvas)[:, None, :]
    self_only = torch.eye(s, dtype=torch.bool, device=context_lens.device)[None]  # pad rows: attend to themselves, never seen by others
    return (ctx_rows | canvas_rows | self_only)[:, None]


def collate(examples: list[Example], pad_id: int, with_mask: bool = True) -> Batch:
    """Tensors for a batch; `with_mask=False` leaves the [B, 1, S, S] mask to `Batch.to` (built on the GPU)."""
    canvas_len = len(examples[0].canvas)
    if any(len(e.canvas) != canvas_len for e in examples):
        raise ValueError("a batch shares one canvas length")
    t_max = max(len(e.context) for e in examples)
    b = len(examples)
    ctx = torch.full((b, t_max), pad_id, dtype=torch.long)
    nxt = torch.full((b, t_max), IGNORE, dtype=torch.long)
    pos = torch.zeros((b, t_max + canvas_len), dtype=torch.long)
    lens = torch.tensor([len(e.context) for e in examples], dtype=torch.long)
    for i, e in enumerate(examples):
        t = len(e.context)
        ctx[i, t_max - t:] = torch.from_numpy(e.context)
        # each context slot predicts the next context token; the last one (end of prefix) the fill's first token
        follow = np.append(e.context[1:], e.canvas[0])
        nxt[i, t_max - t:] = torch.from_numpy(follow)
        pos[i, t_max - t:t_max] = torch.arange(t)
        pos[i, t_max:] = torch.arange(t, t + canvas_len)
    canvas = torch.from_numpy(np.stack([e.canvas for e in examples]))
    heads = torch.tensor([e.head for e in examples], dtype=torch.long)
    return Batch(ctx, canvas, pos, lens, heads, nxt, attention_mask(lens, t_max, canvas_len) if with_mask else None)
