"""The context KV cache: exact for the native layout, reused by token-prefix match.

A keystroke at the cursor appends to the prefix, which is the end of the
native context sequence (`<suf> suffix <pre> prefix`), so the next request's
context shares a long token prefix with the last one: only the tail after the
longest common prefix is encoded. Entries are bounded by bytes, evicted LRU; the default budget is a number of full contexts of the model.

Entries are never written in place below their length, so a request still
running on an older entry's K/V never sees them change; a pure append may
extend an entry's buffer in place (the common typing case, no copy).

For fully bidirectional checkpoints the context depends on the canvas, so no
exact cache exists; `dllm_engine.families` refreshes an approximate one on a
schedule instead (the `ContextEncoder` hook in runner.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch


@dataclass
class CacheEntry:
    ids: torch.Tensor  # [T] int64 on CPU, the context tokens
    buf: torch.Tensor  # [layers, 2, Hkv, capacity, D]
    length: int
    # (length, [D]): the final hidden state of the last token when the entry held `length`
    # tokens (ModelRunner.context_hidden), so a context served whole still has it.
    hidden: tuple[int, torch.Tensor] | None = None

    @property
    def kv(self) -> torch.Tensor:
        return self.buf[:, :, :, : self.length]

    @property
    def nbytes(self) -> int:
        return self.buf.numel() * self.buf.element_size()


@dataclass
class CacheStats:
    lookups: int = 0
    hits: int = 0  # lookups that reused at least one token
    tokens_requested: int = 0
    tokens_reused: int = 0

    @property
    def hit_rate(self) -> float:
        return self.tokens_reused / self.tokens_requested if self.tokens_requested else 0.0


# The default budget (EngineConfig.cache_mb None): room for this many full contexts of the
# model, at most BUDGET_CAP_MB. A budget in bytes alone meant 500 contexts of the small model
# and 17 of the default one; what a user expects kept is "the places I was working at",
# whatever the model: 32 full contexts is every file of a large working set, each context
# still exact when its cursor comes back (a miss costs one context encode, no wrong answer).
BUDGET_CONTEXTS = 32
BUDGET_CAP_MB = 512


def entry_capacity(tokens: int) -> int:
    """Token columns an entry allocates for a context of `tokens`: headroom for the next keystrokes."""
    return max(tokens + 64, int(tokens * 1.25))


def context_budget_bytes(cfg, dtype: torch.dtype, contexts: int = BUDGET_CONTEXTS,
                         cap_mb: int = BUDGET_CAP_MB) -> int:
    """Bytes for `contexts` entries of a full context of model config `cfg` (its trained
    context when it has one, else its window) with K/V in `dtype`, at most `cap_mb` MiB."""
    tokens = int(cfg.extra.get("context_tokens") or cfg.max_position_embeddings)
    per_token = cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * dtype.itemsize  # K and V, every layer
    return min(cap_mb * 2**20, contexts * entry_capacity(tokens) * per_token)


def common_prefix_len(a: torch.Tensor, b: torch.Tensor) -> int:
    n = min(a.numel(), b.numel())
    if n == 0:
        return 0
    diff = (a[:n] != b[:n]).nonzero()
    return int(diff[0]) if diff.numel() else n


class PrefixCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, CacheEntry] = OrderedDict()
        self._next_key = 0
        self._lock = threading.Lock()
        self.stats = CacheStats()

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, ids: torch.Tensor, count: bool = True,
               full: bool = False) -> tuple[int | None, CacheEntry | None, int]:
        """(key, entry, reusable length) for the entry sharing the longest token prefix with `ids`;
        `count=False` peeks without touching the hit statistics or the LRU order; `full=True`
        may return all of `ids` (a caller that needs no hidden state of the last token)."""
        with self._lock:
            best_key, best, best_len = None, None, 0
            for key, entry in self._entries.items():
                n = common_prefix_len(entry.ids, ids)
                if n > best_len:
                    best_key, best, best_len = key, entry, n
            # Keep at least one token to encode: its hidden state is not cached.
            if not full:
                best_len = min(best_len, ids.numel() - 1) if ids.numel() else 0
            if not count:
                return best_key, best, best_len if best is not None else 0
            self.stats.lookups += 1
            self.stats.tokens_requested += int(ids.numel())
            if best is not None and best_len > 0:
                self.stats.hits += 1
                self.stats.tokens_reused += best_len
                self._entries.move_to_end(best_key)
                return best_key, best, best_len
            return None, None, 0

    def store(self, ids: torch.Tensor, base_key: int | None, reuse: int, new_kv: torch.Tensor) -> CacheEntry:
        """Record the context `ids` whose first `reuse` tokens came from entry `base_key`.

        `new_kv` [layers, 2, Hkv, n_new, D] holds the K/V of the encoded tail.
        """
        with self._lock:
            base = self._entries.get(base_key) if base_key is not None else None
            total = reuse + new_kv.shape[3]
            if base is not None and reuse == base.length and total <= base.buf.shape[3]:
                # Pure append into spare capacity: nothing below `length` changes.
                base.buf[:, :, :, reuse:total] = new_kv
                base.length = total
                base.ids = ids.clone()
                self._entries.move_to_end(base_key)
                return base
            layers, two, hkv, _, d = new_kv.shape
            capacity = entry_capacity(total)
            buf = new_kv.new_empty(layers, two, hkv, capacity, d)
            if reuse:
                buf[:, :, :, :reuse] = base.buf[:, :, :, :reuse]
            buf[:, :, :, reuse:total] = new_kv
            entry = CacheEntry(ids=ids.clone(), buf=buf, length=total)
            if base is not None and reuse == base.length:
                del self._entries[base_key]  # superseded by its own extension
            key = self._next_key
            self._next_key += 1
            self._entries[key] = entry
            self._evict()
            return entry

    def mark(self) -> int:
        """A point in the cache's history, for `forget_since`."""
        return self._next_key

    def forget_since(self, mark: int, prefixes_of: list[torch.Tensor] | None = None) -> None:
        """Drop the entries stored since `mark`: a one-off context's (a scoring window's, whose
        suffix no completion shares), which would otherwise push the completions' contexts out
        and hold its K/V until evicted (~23 MB for 1,000 tokens of the default model). With
        `prefixes_of`, only the entries whose tokens start one of those contexts: a one-off
        context encoded over several engine calls lets requests run between them, and their
        contexts, stored meanwhile, stay."""
        with self._lock:
            for key in [k for k in self._entries if k >= mark]:
                ids = self._entries[key].ids
                if prefixes_of is None or any(ids.numel() <= p.numel() and common_prefix_len(ids, p) == ids.numel()
                                              for p in prefixes_of):
                    del self._entries[key]

    def _evict(self) -> None:
        while len(self._entries) > 1 and self.nbytes > self.max_bytes:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
