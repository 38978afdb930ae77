"""The model runner: owns the device, the weights and the context cache.

Tensors in, logits out; no scheduling policy here. Two operations:
- `encode_context(prefix_ids, suffix_ids)`: the native context (`<suf> suffix
  <pre> prefix`) encoded causally, reusing the longest cached token prefix;
- `canvas_logits(contexts, canvases)`: one batched forward of every active
  canvas over its own cached context (variable context lengths, padded);
  `canvas_logits_delayed` runs only the slots whose K/V are not kept from an
  earlier pass (the delayed canvas cache).

A shifted-logit base (a pretrained autoregressive model in our layout) reads slot j
from the row before it: the context's last token is held out of the cache and runs
as row 0 of every canvas pass (seeing the context alone, so slot 0 gets the base's
own next-token head), and the canvas may be decoded in blocks (`decode_block`).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from .checkpoint import LoadedModel
from . import mmap_threshold
from .context_cache import PrefixCache
from .block_decoding import first_masked_block, fold_committed, shifted_canvas_logits
from .layout import causal_mask, native_context_ids, shifted_canvas_mask
from .model import SlotWrite
from .ops import CAUSAL, CanvasSpec
from .protocol import ProtocolError
from .row_buckets import bucket_rows, needs_buckets
from .spare_buffer import SpareBuffer


MAX_CACHED_BATCHES = 8
SPARE_BUFFER_BYTES = 64 * 2**20  # the largest released batch buffer kept for the next batch
PREFIX_TRIM_STEP = 32  # the kept prefix starts on a multiple of this: stable while typing
# A context reusing fewer cached tokens is encoded from its first token: in encode_contexts in
# one padded forward with the others, in _encode alone (both with plain-causal attention).
BATCH_REUSE_BELOW = 32


def trim_to_trained(prefix_ids: list[int], suffix_ids: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Keep the tokens nearest the hole within `budget`: the start of the suffix (at most a
    quarter) and the end of the prefix.

    The cut in the prefix moves in steps of PREFIX_TRIM_STEP tokens, so consecutive
    keystrokes keep the same context start and the prefix cache still serves them.
    """
    suffix_ids = suffix_ids[: min(len(suffix_ids), budget // 4)]
    room = budget - len(suffix_ids)
    if len(prefix_ids) > room:
        start = len(prefix_ids) - room
        start = -(-start // PREFIX_TRIM_STEP) * PREFIX_TRIM_STEP  # round up: never over budget
        prefix_ids = prefix_ids[start:]
    return prefix_ids, suffix_ids


@dataclass
class StackedContexts:
    buf: torch.Tensor  # [layers, 2, B, Hkv, Tmax + room, D]
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer views of buf, [B, Hkv, Tmax + room, D]
    lens: torch.Tensor  # [B] real context rows
    t_max: int
    room: int  # canvas rows that fit after the contexts


@dataclass
class EncodedContext:
    kv: torch.Tensor  # [layers, 2, Hkv, T, D], a view that never changes under us
    length: int
    reused: int  # tokens served by the cache
    last_id: int = -1  # shifted-logit bases: the context's last token, held out of the cache
    ids: torch.Tensor | None = None  # the cached tokens (block decoding extends them)
    absorbed: int = 0  # block decoding: leading canvas slots already folded into this context
    # [D]: the final normed hidden state of the context's last cached token (the row that
    # chose `last_id`), when the runner keeps it (context_hidden): a draft head's start.
    last_hidden: torch.Tensor | None = None
    serial: int = field(default_factory=itertools.count().__next__)  # identity for batch re-use


class ModelRunner:
    compact_logits = True  # canvas_logits(..., compact=True) gives the masked slots' rows alone

    def __init__(self, loaded: LoadedModel, cache_bytes: int) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.config = loaded.config
        if self.config.attention != "native":
            # Bidirectional and block families plug in their own context encoder
            # (dllm_engine.families); the native path below is exact.
            raise ProtocolError(f"attention layout {self.config.attention!r} needs a family runner")
        self.device = next(self.model.parameters()).device
        self.shifted = bool(self.config.logits_shift)
        self.block = int(self.config.decode_block)
        self.last_pass = None  # blocks of 1: the rows of the last absorbing pass, for fold_committed
        # Encodes also keep the last token's hidden state (EncodedContext.last_hidden): the
        # engine sets it when a draft head guesses a canvas's first tokens. It costs the last
        # layer's attention and MLP, which a plain encode skips (one layer in 30 for SmolLM2).
        self.context_hidden = False
        if self.block and not self.shifted:
            raise ProtocolError("block decoding of the native layout needs a shifted-logit model (logits_shift)")
        # The delayed canvas cache keeps committed slots' K/V for a bidirectional canvas;
        # a shifted or block-decoded canvas recomputes its (few) rows instead.
        self.delayed_ok = not self.shifted
        self.cache = PrefixCache(cache_bytes)
        # Padded context K/V per batch composition (one per canvas width class in flight).
        self._batches: OrderedDict[tuple, StackedContexts] = OrderedDict()
        self._spare = SpareBuffer(SPARE_BUFFER_BYTES)  # the last batch let go: its storage for the next

    @property
    def window(self) -> int:
        """Tokens a request may span: the model's positions, or its local layers' sliding window
        (no pass here applies a window mask, so every request must fit inside it)."""
        if self.config.sliding_window:
            return min(self.config.max_position_embeddings, self.config.sliding_window)
        return self.config.max_position_embeddings

    def _context_ids(self, prefix_ids: list[int], suffix_ids: list[int], canvas_room: int,
                     trim: bool = True) -> torch.Tensor:
        trained = self.config.extra.get("context_tokens") if trim else None
        if trained:  # a model trained on short contexts sees what it was trained on
            prefix_ids, suffix_ids = trim_to_trained(prefix_ids, suffix_ids, int(trained) - 2)
        ids_list = native_context_ids(prefix_ids, suffix_ids, self.config)
        if len(ids_list) + canvas_room > self.window:
            raise ProtocolError(
                f"context of {len(ids_list)} tokens plus a {canvas_room}-token fill exceeds the model's "
                f"window of {self.window} tokens; trim the prefix/suffix to a budget first"
            )
        return torch.tensor(ids_list, dtype=torch.long)

    @torch.inference_mode()
    def encode_contexts(self, requests: list[tuple[list[int], list[int], int]]) -> list[EncodedContext | ProtocolError]:
        """Several contexts at once: the ones the cache knows nothing of go through one
        padded causal forward (a batch refactor admits dozens of holes in one step, and
        one forward each was most of its non-pass time); the others reuse their cached
        prefix one by one. A context that does not fit comes back as its ProtocolError."""
        out: list[EncodedContext | ProtocolError | None] = [None] * len(requests)
        fresh: list[tuple[int, torch.Tensor]] = []
        lasts: list[int] = [-1] * len(requests)
        cached: list[torch.Tensor | None] = [None] * len(requests)
        for i, (prefix_ids, suffix_ids, room) in enumerate(requests):
            try:
                ids = self._context_ids(prefix_ids, suffix_ids, room)
            except ProtocolError as exc:
                out[i] = exc
                continue
            ids, lasts[i] = self._hold_out_last(ids)
            cached[i] = ids
            # A long cached prefix (a keystroke) is cheaper alone; a few shared tokens
            # (every native context starts with `<suf>`) are recomputed in the batch.
            if self.cache.lookup(ids, count=False)[2] >= BATCH_REUSE_BELOW or len(requests) == 1:
                out[i] = self._encode(ids)
            else:
                fresh.append((i, ids))
        if len(fresh) == 1:
            out[fresh[0][0]] = self._encode(fresh[0][1])
        elif fresh:
            for i, ctx in zip((i for i, _ in fresh), self._encode_fresh([ids for _, ids in fresh])):
                out[i] = ctx
        for ctx, last, ids in zip(out, lasts, cached):
            if isinstance(ctx, EncodedContext):
                ctx.last_id, ctx.ids = last, ids
        return out  # type: ignore[return-value]

    def _hold_out_last(self, ids: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Shifted logits: the last context token runs with the canvas (its output row gives
        slot 0's logits), so the cache holds the context without it."""
        if not self.shifted:
            return ids, -1
        return ids[:-1], int(ids[-1])

    def _encode_fresh(self, batch: list[torch.Tensor]) -> list[EncodedContext]:
        t_max = max(ids.numel() for ids in batch)
        tokens = torch.full((len(batch), t_max), max(self.config.pad_token_id, 0), dtype=torch.long)
        for row, ids in enumerate(batch):
            tokens[row, : ids.numel()] = ids
        tokens = tokens.to(self.device)
        positions = torch.arange(t_max, device=self.device)[None].expand(len(batch), t_max)
        # Causal: a real token never sees the padding after its context (it comes later), so no
        # padding mask is needed; the padded rows' K/V are never kept. Its activations are large
        # blocks, all freed at the end: from the arena, not each its own mmap (mmap_threshold.py).
        lasts = torch.tensor([ids.numel() - 1 for ids in batch], device=self.device) if self.context_hidden else None
        with mmap_threshold.raised():
            _, new_kv = self.model(tokens, positions, mask=CAUSAL, past=None, kv_only=True, hidden_at=lasts)
        contexts = []
        for row, ids in enumerate(batch):
            n = ids.numel()
            new = torch.stack([torch.stack((k[row, :, :n], v[row, :, :n])) for k, v in new_kv])
            key, _, reuse = self.cache.lookup(ids)  # an identical context earlier in this batch
            stored = self.cache.store(ids, key, reuse, new[:, :, :, reuse:])
            contexts.append(self._with_hidden(
                EncodedContext(kv=stored.buf[:, :, :, :n], length=n, reused=reuse), stored,
                self.model.context_hidden[row] if lasts is not None else None))
        return contexts

    @staticmethod
    def _with_hidden(ctx: EncodedContext, entry, hidden: torch.Tensor | None) -> EncodedContext:
        """`ctx` with its last token's hidden state, which its cache entry keeps too."""
        if hidden is not None:
            ctx.last_hidden = hidden
            entry.hidden = (ctx.length, hidden)
        return ctx

    @torch.inference_mode()
    def encode_context(self, prefix_ids: list[int], suffix_ids: list[int], canvas_room: int,
                       trim: bool = True) -> EncodedContext:
        """`trim` False: past the model's context budget (config extra `context_tokens`), up to
        its window (scoring.py's later windows, which extend the first one's context)."""
        ids, last = self._hold_out_last(self._context_ids(prefix_ids, suffix_ids, canvas_room, trim))
        ctx = self._encode(ids)
        ctx.last_id, ctx.ids = last, ids
        return ctx

    @torch.inference_mode()
    def score_rows(self, contexts: list[EncodedContext], tokens: torch.Tensor, lens: torch.Tensor,
                   extend: bool = False) -> torch.Tensor:
        """Logits [B, W, V] predicting each of `tokens` [B, W] (real up to lens[b]) from its
        context and the tokens before it: a causal chain after each context (a shifted-logit
        model: row 0 is the context's held-out token), whatever block size the canvas decodes in.
        `extend` (one context, all W tokens real): the rows' K/V also go into the prefix cache
        as that context's extension, the context of the tokens after them (held out: the last
        token), as encoding it would store them (scoring.py's next window reads it from there)."""
        b, width = tokens.shape
        if extend and (b != 1 or int(lens[0]) != width or contexts[0].ids is None):
            raise ValueError("extend scores one context's rows, all of them real")
        batch = self._stack_contexts(contexts, width)
        ctx_lens, t_max = batch.lens, batch.t_max
        last_ids = torch.tensor([c.last_id for c in contexts], dtype=torch.long, device=self.device)
        ids = torch.cat((last_ids[:, None], tokens[:, : width - 1]), dim=1)  # row j predicts token j
        rows = torch.arange(width, device=self.device)[None]
        positions = ctx_lens[:, None] + rows
        mask = shifted_canvas_mask(ctx_lens, t_max, rows.expand(b, -1), rows < lens[:, None])
        logits, new_kv = self.model(ids, positions, mask=mask, past=[(k, v, t_max) for k, v in batch.kv],
                                    return_kv=extend)
        self._release(self._batches.pop(tuple(c.serial for c in contexts), None))  # a one-off batch
        if extend:
            ctx = contexts[0]
            key, _, reuse = self.cache.lookup(ctx.ids, count=False, full=True)
            if reuse == ctx.length == ctx.ids.numel():  # (still cached whole: the rows append to it)
                self.cache.store(torch.cat((ctx.ids, ids[0].cpu())), key, reuse,
                                 torch.stack([torch.stack((k[0], v[0])) for k, v in new_kv]))
        return logits

    @torch.inference_mode()
    def score_tree(self, ctx: EncodedContext, tokens: list[int], parents: list[int]) -> torch.Tensor:
        """Logits [N + 1, V] over a tree of N tokens after one context: row 0 reads the context's
        held-out last token, row i + 1 reads tokens[i], whose parent is tokens[parents[i]] (-1:
        row 0); a row's logits predict its children. Each row sees the context, its ancestors
        and itself, at the position its depth gives: every root-to-leaf path reads as its own
        causal chain (score_rows), but texts that start alike (the cuts of one fill) share the
        rows of their common start, and the context is stacked once, not once a text."""
        n = len(tokens)
        sees = torch.eye(n + 1, dtype=torch.bool)
        sees[:, 0] = True
        depth = [0] * (n + 1)
        for i, parent in enumerate(parents, start=1):
            if not -1 <= parent < i - 1:
                raise ValueError(f"node {i - 1}'s parent {parent} does not come before it")
            sees[i] |= sees[parent + 1]
            depth[i] = depth[parent + 1] + 1
        batch = self._stack_contexts([ctx], n + 1)
        t_max = batch.t_max
        ids = torch.tensor([[ctx.last_id, *tokens]], dtype=torch.long, device=self.device)
        positions = ctx.length + torch.tensor([depth], device=self.device)
        ctx_ok = (torch.arange(t_max, device=self.device) < ctx.length)[None].expand(n + 1, -1)
        mask = torch.cat((ctx_ok, sees.to(self.device)), dim=-1)[None, None]
        logits, _ = self.model(ids, positions, mask=mask, past=[(k, v, t_max) for k, v in batch.kv])
        self._release(self._batches.pop((ctx.serial,), None))  # a one-off batch
        return logits[0]

    @torch.inference_mode()
    def encode_tokens(self, ids: torch.Tensor) -> EncodedContext:
        """Context tokens as they will be cached (`cache_ids`), encoded onto the longest cached
        start (prepare.py); the cache's hit statistics count requests only."""
        return self._encode(ids, count=False)

    def cache_ids(self, prefix_ids: list[int], suffix_ids: list[int], trim: bool = True) -> torch.Tensor:
        """The tokens a request with this context keeps in the cache (no canvas room asked);
        `trim` as in encode_context."""
        return self._hold_out_last(self._context_ids(prefix_ids, suffix_ids, 1, trim))[0]

    def _encode(self, ids: torch.Tensor, count: bool = True) -> EncodedContext:
        # The native canvas reads only the context's K/V, never the last token's hidden
        # state, so a context the cache holds whole needs no forward at all.
        key, entry, reuse = self.cache.lookup(ids, count=count, full=True)
        if reuse == ids.numel():
            kept = entry.hidden[1] if entry.hidden is not None and entry.hidden[0] == reuse else None
            return EncodedContext(kv=entry.buf[:, :, :, :reuse], length=reuse, reused=reuse, last_hidden=kept)
        if reuse < min(BATCH_REUSE_BELOW, (ids.numel() - reuse) // 8):
            # A cursor in a new place shares little more than the context's first marker with any
            # entry: encoding from the first token again costs nothing and runs the faster
            # plain-causal attention (a long tail after a reused start needs the explicit mask).
            key, reuse = None, 0
        past = None
        if reuse:
            kv = entry.buf[:, :, :, :reuse]
            past = [(kv[i, 0][None], kv[i, 1][None]) for i in range(kv.shape[0])]
        tail = ids[reuse:].to(self.device)[None]
        positions = torch.arange(reuse, ids.numel(), device=self.device)[None]
        mask = causal_mask(reuse, tail.shape[1], self.device) if reuse else CAUSAL
        last = torch.tensor([tail.shape[1] - 1], device=self.device) if self.context_hidden else None
        with mmap_threshold.raised():  # large activation blocks from the arena (mmap_threshold.py)
            _, new_kv = self.model(tail, positions, mask=mask, past=past, kv_only=True, hidden_at=last)
        new = torch.stack([torch.stack((k[0], v[0])) for k, v in new_kv])  # [layers, 2, Hkv, n, D]
        stored = self.cache.store(ids, key, reuse, new)
        return self._with_hidden(EncodedContext(kv=stored.buf[:, :, :, : ids.numel()], length=ids.numel(), reused=reuse),
                                 stored, self.model.context_hidden[0] if last is not None else None)

    def _stack_contexts(self, contexts: list[EncodedContext], canvas_len: int, spare: int = 0) -> "StackedContexts":
        """Pad every context's K/V to the longest, once per batch composition.

        The buffer keeps room after the contexts for the canvas rows, which each
        pass writes in place (no per-pass copy of the whole context); at least `spare`
        rows of it when a new buffer is made (a context that grows in it: carry_batch).
        """
        key = tuple(c.serial for c in contexts)
        old = self._batches.get(key)
        if old is not None and old.room >= canvas_len:
            self._batches.move_to_end(key)
            return old
        t_max = max(c.length for c in contexts)
        room = max(2 * canvas_len if old is not None else canvas_len, spare)  # a canvas that grew may grow again
        layers, _, hkv, _, d = contexts[0].kv.shape
        # On a CPU in bf16, up to the attention's key bucket: a pass pads its keys with these
        # rows (attention_buckets.pad_attention) instead of copying every key each layer.
        length = bucket_rows(t_max + room) if needs_buckets(contexts[0].kv) else t_max + room
        stacked = self._spare.take((layers, 2, len(contexts), hkv, length, d), contexts[0].kv)
        for row, ctx in enumerate(contexts):
            stacked[:, :, row, :, : ctx.length] = ctx.kv
            stacked[:, :, row, :, ctx.length:] = 0  # finite: padded keys are read (with zero weight)
        batch = StackedContexts(
            buf=stacked, kv=[(stacked[i, 0], stacked[i, 1]) for i in range(layers)],
            lens=torch.tensor([c.length for c in contexts], device=self.device), t_max=t_max, room=room)
        self._batches[key] = batch
        self._release(old)
        while len(self._batches) > MAX_CACHED_BATCHES:
            self._release(self._batches.popitem(last=False)[1])
        return batch

    def _release(self, batch: "StackedContexts | None") -> None:
        """A batch no pass will run on again (replaced, evicted, one-off or forgotten): its
        buffer may serve the next batch (spare_buffer.py)."""
        if batch is not None:
            self._spare.give(batch.buf)

    def carry_batch(self, batch: "StackedContexts", ctx: EncodedContext, old_length: int) -> None:
        """A one-context batch whose pass ran the rows that just joined `ctx` right after its
        old `old_length` rows: the buffer is kept under the context's new identity, with less
        room, instead of being stacked again (a copy of the whole context's K/V every pass of
        a blocks-of-1 fill). The joined rows are copied in from the context's own K/V (the
        pass's rows, or an older entry's for the same tokens), so the buffer is exactly what
        stacking would make."""
        grown = ctx.length - old_length
        if batch.t_max != old_length or grown > batch.room or batch.buf.shape[2] != 1:
            return
        for key, kept in self._batches.items():
            if kept is batch:
                del self._batches[key]
                break
        else:
            return
        batch.buf[:, :, 0, :, old_length:ctx.length] = ctx.kv[:, :, :, old_length:ctx.length]
        batch.t_max, batch.room = ctx.length, batch.room - grown
        batch.lens = torch.tensor([ctx.length], device=self.device)
        self._batches[(ctx.serial,)] = batch

    @torch.inference_mode()
    def canvas_logits(self, contexts: list[EncodedContext], canvases: torch.Tensor, canvas_lens: torch.Tensor,
                      rows: torch.Tensor | None = None, compact: bool = False, absorb: bool = False,
                      drafts: torch.Tensor | None = None, draft_rows: bool = False,
                      branches: list | None = None):
        """Logits [B, L, V] for canvases [B, L] (rows padded past canvas_lens[b]).

        With `rows` (bool [B, L]) only those slots get logits (the others are zero);
        with `compact` too, only those slots come back, [M, V] in row-major order
        (no [B, L, V] tensor to zero and scatter into: a tenth of a batched pass on a CPU).
        `absorb` (the engine's own holes, block decoding): finished blocks join their hole's
        context (block_decoding.py), so a pass runs only the current block. `drafts`: guessed
        tokens run in masked slots (shifted-logit models: drafting.py). `draft_rows`: the masked
        slots the pass runs are draft rows (the model's draft adapter acts on them alone).
        `branches`: a draft tree's other guesses (draft_tree.py); the return is then
        (logits, branch_logits) (block_decoding.shifted_canvas_logits).
        """
        if self.shifted:
            return shifted_canvas_logits(self, contexts, canvases, canvas_lens, rows, compact, absorb, drafts,
                                         draft_rows, branches)
        if drafts is not None or branches is not None:
            raise ValueError("drafts need a shifted-logit model")
        b, length = canvases.shape
        batch = self._stack_contexts(contexts, length)
        ctx_lens, t_max = batch.lens, batch.t_max
        positions = ctx_lens[:, None] + torch.arange(length, device=self.device)[None]
        cols_ctx = torch.arange(t_max, device=self.device)[None] < ctx_lens[:, None]
        cols_canvas = torch.arange(length, device=self.device)[None] < canvas_lens[:, None]
        mask = torch.cat((cols_ctx, cols_canvas), dim=1)[:, None, None, :]  # [B, 1, 1, Tmax+L]
        past = [(k, v, t_max) for k, v in batch.kv]
        spec = CanvasSpec(context_lens=ctx_lens, canvas_lens=canvas_lens)
        logits, _ = self.model(canvases, positions, mask=mask, past=past, logits_rows=rows, canvas=spec,
                               compact=compact and rows is not None)
        return logits

    def decode_window(self, canvases: torch.Tensor, masked: torch.Tensor) -> torch.Tensor | None:
        """bool [B, W]: the slots each canvas may commit this pass (its first block that still
        has a mask), or None when the whole canvas is one block."""
        if not self.block:
            return None
        blk = torch.arange(canvases.shape[1], device=canvases.device)[None] // self.block  # [1, W]
        return blk == first_masked_block(masked, self.block)[:, None]

    @torch.inference_mode()
    def canvas_logits_delayed(self, contexts: list[EncodedContext], canvases: torch.Tensor, canvas_lens: torch.Tensor,
                              rows: torch.Tensor, fresh: torch.Tensor,
                              kept: list[torch.Tensor | None]) -> tuple[torch.Tensor, torch.Tensor]:
        """Like canvas_logits, but only the `fresh` slots (bool [B, L]) go through the model;
        the others attend and are attended to with the K/V in `kept` (per canvas
        [layers, 2, Hkv, n, D] from an earlier pass, or None when every slot is fresh).
        A kept entry that is the view this buffer returned for the same row (the batch is
        unchanged since the last pass) is already in place and is not copied.

        Returns the logits of the `rows` slots, [M, V] in row-major order (`rows` must be
        fresh), and the canvas K/V after this pass, [layers, 2, B, Hkv, L, D] (a view of the
        batch buffer, which later delayed passes of the same batch update in place).
        """
        b, length = canvases.shape
        batch = self._stack_contexts(contexts, length + 1)  # one scratch column for padding rows
        t_max = batch.t_max
        room = batch.buf[:, :, :, :, t_max:t_max + length]
        for row, kv in enumerate(kept):
            # Copy only K/V that live elsewhere: a hole that joined from another batch, or a
            # batch buffer reused from earlier (its room is older than the hole's K/V).
            if kv is not None and kv.data_ptr() != room[:, :, row].data_ptr():
                room[:, :, row, :, :kv.shape[-2]] = kv
        n_fresh = fresh.sum(-1)
        width = max(1, int(n_fresh.max()))
        order = torch.sort((~fresh).to(torch.int8), dim=-1, stable=True).indices[:, :width]  # fresh slots first
        pad = torch.arange(width, device=self.device)[None] >= n_fresh[:, None]
        slot = order.masked_fill(pad, length)  # padding rows write to the scratch column
        ids = canvases.gather(1, order)
        positions = batch.lens[:, None] + order
        cols_ctx = torch.arange(t_max, device=self.device)[None] < batch.lens[:, None]
        cols_canvas = torch.arange(length, device=self.device)[None] < canvas_lens[:, None]
        scratch = torch.zeros((b, 1), dtype=torch.bool, device=self.device)
        mask = torch.cat((cols_ctx, cols_canvas, scratch), dim=1)[:, None, None, :]
        end = t_max + length + 1
        past = [SlotWrite(k, v, t_max, slot, end) for k, v in batch.kv]
        # Fresh slots keep their slot order within a row, so the packed rows come out in
        # the same row-major order as rows.nonzero().
        want = rows.gather(1, order) & ~pad
        logits, _ = self.model(ids, positions, mask=mask, past=past, logits_rows=want, compact=True)
        return logits, room

    @torch.inference_mode()
    def fold_committed(self, canvases: torch.Tensor, paths: dict | None = None) -> None:
        """After a blocks-of-1 pass with `absorb`: its committed rows join their contexts
        (block_decoding.fold_committed; `paths`: commits that came through draft-tree
        branches); a no-op after any other pass."""
        fold_committed(self, canvases, self.config.mask_token_id, paths)

    def edit_canvas(self, canvas: torch.Tensor, committed: torch.Tensor, max_tokens: int) -> torch.Tensor:
        """Length edits after a pass: none for the native layout (DreamOn's runner has some)."""
        return canvas

    def forget_batch(self) -> None:
        for batch in self._batches.values():
            self._release(batch)
        self._batches.clear()
