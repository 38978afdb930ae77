"""The engine's runner for DiffusionGemma: same interface as FamilyRunner
(`encode_context`, `canvas_logits`, `edit_canvas`, `forget_batch`, `cache`).

How transformers' `generate` runs the model, and how the engine's loop maps onto it:
- the prompt (`<bos>` + prefix; the suffix is not seen) goes through the causal
  encoder once, into a per-hole K/V cache (`encode_context`). The cache is exact:
  nothing the canvas does changes it.
- each pass runs the bidirectional canvas decoder over that cache, canvas positions
  continuing after the prompt. Every canvas slot gets logits.
- no mask token: a slot the engine has not committed (its placeholder id) is fed
  as a uniform random token, drawn afresh each pass (the EntropyBoundSampler's
  renoising), from a generator per hole so results do not depend on batching.
- self-conditioning: each pass feeds the previous pass's logits for the same
  canvas block, scaled by the schedule's final temperature (greedy decoding sits
  at its cold end), cast to the embedding dtype as `generate` does.
- canvases longer than `canvas_length` run block by block as in `generate`: once a
  block is fully committed it is encoded into the hole's cache (exact), and the next
  block is decoded after it. Slots of finished blocks get all mass on their token,
  slots of later blocks flat logits (never the most confident), as block families.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from dataclasses import dataclass, field

import torch

from ..protocol import ProtocolError
from .family_runner import CacheStats
from .infill_layout import FamilyContext

NOISE_SEED = 0  # one noise stream per hole, the same for the same hole: reproducible fills


@dataclass
class GemmaContext(FamilyContext):
    prompt: list[int] = field(default_factory=list)
    cache: object = None  # transformers DynamicCache for this hole (batch 1)
    encoded: list[int] = field(default_factory=list)  # canvas tokens already in the cache
    noise: torch.Generator | None = None
    sc: torch.Tensor | None = None  # [w, V] previous pass's scaled logits for the current block
    sc_key: tuple = ()  # (block start, width) the self-conditioning logits belong to


class DiffusionGemmaRunner:
    def __init__(self, loaded, cache_bytes: int = 0) -> None:
        cfg = loaded.config
        if cfg.extra.get("unresolved_special_ids"):
            raise ProtocolError(f"{loaded.path}: special ids {cfg.extra['unresolved_special_ids']} unknown; add the tokenizer files")
        self.loaded, self.model, self.config = loaded, loaded.model, cfg
        self.device = self.model.device
        self.block = cfg.block_size
        self.sc_temperature = float(cfg.extra.get("self_conditioning_temperature", 0.4))
        self.cache = self  # engine metrics read .stats, len() and .nbytes
        self.stats = CacheStats()
        self._live: weakref.WeakValueDictionary[int, GemmaContext] = weakref.WeakValueDictionary()

    # ---- what engine metrics read from a cache
    def __len__(self) -> int:
        return len(self._live)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for c in list(self._live.values()) if c.cache is not None
                   for layer in c.cache.layers for t in (layer.keys, layer.values) if t is not None)

    @property
    def window(self) -> int:
        return self.config.max_position_embeddings

    def forget_batch(self) -> None:
        """Contexts own their caches; nothing is shared between batches."""

    def edit_canvas(self, canvas: torch.Tensor, committed: torch.Tensor, max_tokens: int) -> torch.Tensor:
        return canvas

    def encode_context(self, prefix_ids: list[int], suffix_ids: list[int], canvas_room: int) -> GemmaContext:
        start = self.config.extra.get("bos_token_id")
        if start is None:
            start = self.config.eos_token_id  # the encoder needs at least one token before the canvas
        prompt = list(prefix_ids) if prefix_ids[:1] == [start] else [start, *prefix_ids]
        if len(prompt) + canvas_room > self.window:
            raise ProtocolError(f"context of {len(prompt)} tokens plus a {canvas_room}-token fill exceeds the model's "
                                f"window of {self.window} tokens; trim the prefix to a budget first")
        ctx = GemmaContext(list(prefix_ids), list(suffix_ids), length=len(prompt), prompt=prompt)
        ctx.cache = self.model.encode(prompt)
        ctx.noise = torch.Generator(device=self.device).manual_seed(NOISE_SEED)
        self.stats.misses += 1
        self._live[ctx.serial] = ctx
        return ctx

    @torch.inference_mode()
    def canvas_logits(self, contexts: list[GemmaContext], canvases: torch.Tensor, canvas_lens: torch.Tensor,
                      rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, W, V] aligned to canvas slots. `rows` is accepted for interface parity."""
        b, width = canvases.shape
        vocab = self.config.vocab_size
        lens = canvas_lens.tolist()
        masked = canvases == self.config.mask_token_id
        starts, spans, contexts, synced = [], [], list(contexts), {}
        for r, ctx in enumerate(contexts):
            n = lens[r]
            todo = masked[r, :n].nonzero()
            first = int(todo[0]) if todo.numel() else max(n - 1, 0)
            s = first // self.block * self.block
            done = canvases[r, :s].tolist()
            if synced.setdefault(id(ctx), done) != done:  # one context twice (scoring) at different blocks
                contexts[r] = ctx = dataclasses.replace(ctx, cache=copy.deepcopy(ctx.cache), encoded=list(ctx.encoded))
            self._sync_cache(ctx, done)
            starts.append(s)
            spans.append(min(self.block, n - s))
        w = max(spans)
        dec = torch.full((b, w), self.config.pad_token_id, dtype=torch.long, device=self.device)
        pos = torch.zeros((b, w), dtype=torch.long, device=self.device)
        for r, ctx in enumerate(contexts):
            s, k = starts[r], spans[r]
            block = canvases[r, s:s + k].clone()
            noisy = block == self.config.mask_token_id
            if noisy.any():  # renoise: a fresh uniform token for every slot not committed yet
                draw = torch.randint(0, vocab, (k,), generator=ctx.noise, device=self.device)
                block = torch.where(noisy, draw, block)
            dec[r, :k] = block
            pos[r] = ctx.length + len(ctx.encoded) + torch.arange(w, device=self.device)
        cache, kv_mask = self._batched_cache(contexts, spans, w)
        sc, sc_mask = self._self_conditioning(contexts, starts, spans, w)
        logits = self.model.decode(dec, cache, pos, kv_mask, sc, sc_mask)  # [B, w, V] float32
        self.stats.hits += b
        for r, ctx in enumerate(contexts):
            ctx.sc = (logits[r, :spans[r]] / self.sc_temperature).to(self.model.embed_dtype)
            ctx.sc_key = (starts[r], spans[r])
        return self._assemble(logits, canvases, starts, spans, width)

    # ---- per-hole cache: the prompt plus every finished canvas block, exact
    def _sync_cache(self, ctx: GemmaContext, done: list[int]) -> None:
        if ctx.encoded == done:
            return
        if done[: len(ctx.encoded)] == ctx.encoded:  # blocks finished since: append them (as generate does)
            self.model.encode(done[len(ctx.encoded):], ctx.cache, start=ctx.length + len(ctx.encoded))
        else:  # a finished block changed (re-masking): rebuild from the prompt
            ctx.cache = self.model.encode(ctx.prompt + done)
        ctx.encoded = list(done)
        ctx.sc, ctx.sc_key = None, ()
        self.stats.misses += 1

    def _batched_cache(self, contexts: list[GemmaContext], spans: list[int], w: int):
        """One cache for the batch: each layer's K/V left-padded to the longest row, and bool masks
        [B, 1, w, K + w] per layer type (padding and other rows' unused canvas slots hidden).
        Sliding layers hold only their window (transformers' DynamicSlidingWindowLayer), so
        their K differs from the full layers' K; the decoder attends fully to what is cached."""
        from transformers.cache_utils import DynamicCache

        if len(contexts) == 1 and spans[0] == w:
            return contexts[0].cache, None  # exactly transformers' own call
        text = self.model.text_config
        kv, masks = [], {}
        slot_ok = torch.arange(w, device=self.device)[None] < torch.tensor(spans, device=self.device)[:, None]
        for i, kind in enumerate(text.layer_types):
            layers = [c.cache.layers[i] for c in contexts]
            longest = max(layer.keys.shape[2] for layer in layers)
            keys = torch.cat([_left_pad(layer.keys, longest) for layer in layers])
            values = torch.cat([_left_pad(layer.values, longest) for layer in layers])
            kv.append((keys, values))
            if kind not in masks:
                have = torch.tensor([layer.keys.shape[2] for layer in layers], device=self.device)
                cached_ok = torch.arange(longest, device=self.device)[None] >= (longest - have)[:, None]
                keys_ok = torch.cat((cached_ok, slot_ok), 1)  # [B, K + w]
                masks[kind] = keys_ok[:, None, None, :].expand(-1, 1, w, -1)
        return DynamicCache(ddp_cache_data=kv), masks

    def _self_conditioning(self, contexts, starts, spans, w):
        have = [c.sc is not None and c.sc_key == (s, k) for c, s, k in zip(contexts, starts, spans)]
        if not any(have):
            return None, None
        sc = torch.zeros((len(contexts), w, self.config.vocab_size), dtype=self.model.embed_dtype, device=self.device)
        for r, ctx in enumerate(contexts):
            if have[r]:
                sc[r, :spans[r]] = ctx.sc
        return sc, torch.tensor(have, device=self.device)

    def _assemble(self, logits, canvases, starts, spans, width) -> torch.Tensor:
        b, vocab = canvases.shape[0], logits.shape[-1]
        out = torch.zeros((b, width, vocab), dtype=logits.dtype, device=self.device)  # later blocks: flat
        for r in range(b):
            s, k = starts[r], spans[r]
            out[r, s:s + k] = logits[r, :k]
            if s:  # finished blocks are final: all mass on their token
                out[r, :s] = -1e4
                out[r, :s].scatter_(-1, canvases[r, :s, None], 0.0)
        return out


def _left_pad(t: torch.Tensor, length: int) -> torch.Tensor:
    """[1, H, L, D] -> [1, H, length, D] with zeros on the left."""
    return torch.nn.functional.pad(t, (0, 0, length - t.shape[2], 0))
