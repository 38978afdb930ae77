"""The model runner for third-party families: same interface as `runner.ModelRunner`
(`encode_context`, `canvas_logits`, `forget_batch`, `cache`), so the engine loop,
scheduler and denoiser are shared.

Context K/V:
- bidirectional families (every token sees the canvas): an *approximate* cache
  as in Fast-dLLM. A refresh pass runs the whole sequence and keeps the K/V of
  every column outside the canvas window; the next `refresh_every - 1` passes
  run only the window (canvas, plus the column before it for shifted logits)
  against those K/V. `refresh_every=1` is the exact mode: full recompute each pass.
  Any change of batch or canvas lengths forces a refresh.
- block families: the K/V of every column before the earliest current block
  never depends on later tokens, so that cache is *exact*; it is extended
  incrementally as blocks finish, and only the current blocks onward are run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import mmap_threshold
from ..checkpoint import LoadedModel
from ..protocol import ProtocolError
from .infill_layout import FamilyContext, Rows, build_rows, current_block_start, dreamon_edit


@dataclass
class CacheStats:
    hits: int = 0  # passes served from cached K/V
    misses: int = 0  # full passes / cache extensions

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class FamilyRunner:
    def __init__(self, loaded: LoadedModel, cache_bytes: int = 0, refresh_every: int = 4) -> None:
        cfg = loaded.config
        if cfg.attention not in ("bidirectional", "block"):
            raise ProtocolError(f"FamilyRunner runs bidirectional and block families, not {cfg.attention!r}")
        if cfg.extra.get("unresolved_special_ids"):
            raise ProtocolError(f"{loaded.path}: special ids {cfg.extra['unresolved_special_ids']} unknown; add the tokenizer files")
        if refresh_every < 1:
            raise ValueError("refresh_every must be >= 1 (1 = exact: recompute every pass)")
        self.loaded, self.model, self.config = loaded, loaded.model, cfg
        self.device = next(self.model.parameters()).device
        self.refresh_every = refresh_every
        self.cache = self  # engine metrics read .stats, len() and .nbytes
        self.stats = CacheStats()
        self.forget_batch()

    # ---- what engine metrics read from a cache
    def __len__(self) -> int:
        return 0 if self._kv is None else 1

    @property
    def nbytes(self) -> int:
        return 0 if self._kv is None else sum(k.numel() * k.element_size() * 2 for k, _ in self._kv)

    @property
    def window(self) -> int:
        return self.config.max_position_embeddings

    def forget_batch(self) -> None:
        self._key: tuple | None = None
        self._kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._cached_upto = 0  # block families: K/V held for columns [0, _cached_upto)
        self._since_refresh = 0

    def encode_context(self, prefix_ids: list[int], suffix_ids: list[int], canvas_room: int) -> FamilyContext:
        used = len(prefix_ids) + (0 if self.config.attention == "block" else len(suffix_ids))
        if used + canvas_room > self.window:
            raise ProtocolError(f"context of {used} tokens plus a {canvas_room}-token fill exceeds the model's "
                                f"window of {self.window} tokens; trim the prefix/suffix to a budget first")
        return FamilyContext(list(prefix_ids), list(suffix_ids), length=used)

    @torch.inference_mode()
    def canvas_logits(self, contexts: list[FamilyContext], canvases: torch.Tensor, canvas_lens: torch.Tensor,
                      rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, W, V] aligned to canvas slots (shift already applied). `rows` (the engine's
        "only these slots need logits") is accepted for interface parity; every slot gets logits."""
        rows = build_rows(self.config, contexts, canvases, canvas_lens)
        key = (tuple(c.serial for c in contexts), canvases.shape[1], tuple(canvas_lens.tolist()))
        if key != self._key:
            self.forget_batch()
            self._key = key
        # Each pass runs over the whole context (or its uncached blocks): large activation blocks
        # every pass, all freed when it ends, from the arena (mmap_threshold.py).
        with mmap_threshold.raised():
            if self.config.attention == "block":
                return self._block_pass(rows, canvases, canvas_lens)
            return self._bidirectional_pass(rows)

    def edit_canvas(self, canvas: torch.Tensor, committed: torch.Tensor, max_tokens: int) -> torch.Tensor:
        """Length edits after a pass, for one canvas [L] given this pass's commits [L] (bool).

        Identity except for DreamOn: `[expand]` -> two masks, a committed EOS deletes its slot
        (and the masks right of it). When no mask is left, an EOS is appended so the engine's
        usual end-of-fill rule finishes the hole (DreamOn is done when its canvas is full).
        """
        if self.config.extra.get("infill") != "expand":
            return canvas
        out = dreamon_edit(canvas.tolist(), committed.tolist(), self.config, max_tokens)
        if self.config.mask_token_id not in out:
            out.append(self.config.eos_token_id)
        return torch.tensor(out, dtype=canvas.dtype, device=canvas.device)

    # ---- bidirectional: approximate cache with scheduled refresh
    def _bidirectional_pass(self, rows: Rows) -> torch.Tensor:
        w0 = int(rows.src_cols.min())
        w1 = int(rows.canvas_cols.max()) + 1
        if self._kv is None or self._since_refresh >= self.refresh_every - 1 or self.refresh_every == 1:
            logits, kv = self.model(rows.ids, rows.positions, rows.mask, return_kv=self.refresh_every > 1,
                                    logits_slice=slice(w0, w1))
            if self.refresh_every > 1:
                self._kv = [(torch.cat((k[:, :, :w0], k[:, :, w1:]), 2), torch.cat((v[:, :, :w0], v[:, :, w1:]), 2)) for k, v in kv]
            self._since_refresh = 0
            self.stats.misses += 1
        else:
            s = rows.ids.shape[1]
            order = torch.cat((torch.arange(0, w0), torch.arange(w1, s), torch.arange(w0, w1))).to(rows.ids.device)
            mask = rows.mask[:, :, w0:w1][..., order]
            logits, _ = self.model(rows.ids[:, w0:w1], rows.positions[:, w0:w1], mask, past=self._kv)
            self._since_refresh += 1
            self.stats.hits += 1
        return logits.gather(1, (rows.src_cols - w0)[..., None].expand(-1, -1, logits.shape[-1]))

    # ---- block: exact cache of everything before the earliest current block
    def _block_pass(self, rows: Rows, canvases: torch.Tensor, canvas_lens: torch.Tensor) -> torch.Tensor:
        width = canvases.shape[1]
        slot_ok = torch.arange(width, device=canvases.device)[None] < canvas_lens[:, None]
        masked = (canvases == self.config.mask_token_id) & slot_ok
        starts = current_block_start(self.config, rows, masked)
        # The cache may only end at a block boundary (tokens see their whole block). Shifted
        # logits read the column before the block, so keep the previous block in the window too.
        bs = self.config.block_size
        back = bs if self.config.logits_shift else 0
        w0 = max(0, min(int(starts.min()), int(rows.canvas_cols.max()) + 1) // bs * bs - back)
        if w0 < self._cached_upto:  # a slot before the cache end was re-masked: drop the tail
            self._kv = [(k[:, :, :w0], v[:, :, :w0]) for k, v in self._kv]
            self._cached_upto = w0
        if w0 > self._cached_upto:  # extend the exact cache with the newly finished columns
            c0 = self._cached_upto
            _, kv = self.model(rows.ids[:, c0:w0], rows.positions[:, c0:w0], rows.mask[:, :, c0:w0, :w0],
                               past=self._kv, kv_only=True)
            self._kv = kv if self._kv is None else [(torch.cat((pk, k), 2), torch.cat((pv, v), 2)) for (pk, pv), (k, v) in zip(self._kv, kv)]
            self._cached_upto = w0
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        c = self._cached_upto
        past = None if c == 0 else [(k[:, :, :c], v[:, :, :c]) for k, v in self._kv]
        logits, _ = self.model(rows.ids[:, c:], rows.positions[:, c:], rows.mask[:, :, c:, :], past=past)
        out = logits.gather(1, (rows.src_cols - c).clamp(min=0)[..., None].expand(-1, -1, logits.shape[-1]))
        # Slots past each row's current block cannot be committed yet: flat logits give them the
        # lowest confidence of every kind, so a confidence-ordered denoiser leaves them alone.
        block_of = rows.canvas_cols // self.config.block_size
        later = block_of > (starts // self.config.block_size)[:, None]
        out = out.masked_fill(later[..., None], 0.0)
        # Slots in blocks already in the exact cache are final: all mass on their token
        # (so a re-masking denoiser never doubts them).
        final = (rows.src_cols < c)[..., None]
        onehot = torch.full_like(out, -1e4).scatter(-1, canvases[..., None], 0.0)
        return torch.where(final, onehot, out)


def make_runner(loaded: LoadedModel, cache_bytes: int, refresh_every: int | None = None):
    """The runner for any checkpoint: the native exact-cache runner, DiffusionGemma's
    encoder-decoder runner, or a FamilyRunner with the family's recommended cache refresh schedule."""
    if loaded.config.attention == "native":
        from ..runner import ModelRunner

        return ModelRunner(loaded, cache_bytes)
    if loaded.config.attention == "encoder_decoder":  # DiffusionGemma: exact prompt cache, no refresh schedule
        from .gemma_runner import DiffusionGemmaRunner

        return DiffusionGemmaRunner(loaded, cache_bytes)
    from .defaults import defaults_for

    every = refresh_every or defaults_for(loaded.config.family).refresh_every
    return FamilyRunner(loaded, cache_bytes, refresh_every=every)
