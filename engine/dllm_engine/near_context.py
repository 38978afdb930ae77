"""A new place's first answers read the nearest part of its context while the whole of it is encoded behind them.

Why: a native context starts with the suffix (`<suf> suffix <pre> prefix`), so a cursor at a
new place shares nothing with any cached context, and its first request encodes the whole
context before its first pass: ~740 tokens of the language server's window, ~0.8 s on 2 AMD
EPYC cores without AMX. In the keystroke replay every single-line answer over ~450 ms was such
a first answer, queued behind that encoding (benchmarks/RESULTS.md, thirty-first session).

A hole that asks for it (`Hole.near_tokens`, the language server's typed completions) is
filled, while more of its whole context is uncached than of its near part, from the near part:
the suffix's start (at most a quarter) and the prefix's end, `near_tokens` in all
(runner.trim_to_trained, whose 32-token grid keeps the start still while the user types, so
the next keystrokes reuse it). The engine then encodes the whole context a chunk at a time
while no request waits or runs (`CatchUp`), and the first request that finds no more of the
whole context to encode than of the near one reads the whole. What the near part costs in
quality and saves in time was measured before it shipped (bench_context_budget.py).
"""

from __future__ import annotations

import time

import torch

from .runner import PREFIX_TRIM_STEP, trim_to_trained

# Tokens a catch-up step encodes: a keystroke that arrives meanwhile waits for at most one
# step (64 tokens onto ~1,000 cached: 130-150 ms on 2 AMD EPYC cores, 128: 180-230 ms).
CHUNK = 64
# The catch-up waits this long after the last request arrived: a typist's keystrokes come
# every ~0.1 s and each would otherwise meet a chunk in flight; it runs in the pauses.
QUIET_S = 0.25


def near_ids(runner, prefix_ids: list[int], suffix_ids: list[int],
             near_tokens: int) -> tuple[list[int], list[int], torch.Tensor | None]:
    """(prefix ids, suffix ids) to encode for a hole asking for a near reading, and the whole
    context's cache ids when the near part was chosen (None: read the whole). On the engine
    thread: the choice reads the context cache."""
    if not hasattr(runner, "cache_ids"):  # a family runner keeps no exact context cache
        return prefix_ids, suffix_ids, None
    whole = runner.cache_ids(prefix_ids, suffix_ids)
    whole_todo = whole.numel() - _cached(runner, whole)
    if whole_todo == 0 or whole.numel() <= near_tokens:
        return prefix_ids, suffix_ids, None
    options = []
    for near_prefix, near_suffix in _near_windows(prefix_ids, suffix_ids, near_tokens):
        near = runner.cache_ids(near_prefix, near_suffix)
        options.append((near.numel() - _cached(runner, near), near_prefix, near_suffix))
    # The least to encode; on a tie min keeps the first, the window within budget.
    near_todo, near_prefix, near_suffix = min(options, key=lambda option: option[0])
    if whole_todo <= near_todo:
        return prefix_ids, suffix_ids, None
    return near_prefix, near_suffix, whole


def _near_windows(prefix_ids: list[int], suffix_ids: list[int], near_tokens: int):
    """The near part within `near_tokens`, then the same reaching back one and two steps of the
    prefix's grid: the window a few keystrokes ago started there, and while the whole context
    is caught up that cached window serves (a typist crossing a grid line would otherwise have
    the near part encoded again: ~0.5 s, the replay's one slow near answer)."""
    near_prefix, near_suffix = trim_to_trained(prefix_ids, suffix_ids, near_tokens)
    yield near_prefix, near_suffix
    start = len(prefix_ids) - len(near_prefix)
    for back in (PREFIX_TRIM_STEP, 2 * PREFIX_TRIM_STEP):
        if start - back >= 0:
            yield prefix_ids[start - back:], near_suffix


def _cached(runner, ids: torch.Tensor) -> int:
    return runner.cache.lookup(ids, count=False, full=True)[2]


class CatchUp:
    """The whole context of the last place answered from its near part, encoded a chunk per
    idle moment of the engine thread. One place at a time: the user types in one place, and
    a newer place's context replaces an older one's."""

    def __init__(self, runner, chunk: int = CHUNK, quiet_s: float = QUIET_S) -> None:
        self._runner = runner
        self._chunk = chunk
        self._quiet_s = quiet_s
        self._ids: torch.Tensor | None = None
        self._heard = 0.0  # time.monotonic() of the last request's arrival
        self.encoded = 0  # tokens encoded so far, for the engine's metrics

    def want(self, ids: torch.Tensor) -> None:
        self._ids = ids

    def forget(self) -> None:
        self._ids = None

    def pending(self) -> bool:
        return self._ids is not None

    def heard(self) -> None:
        """A request arrived: the user is typing, the catch-up waits for a pause."""
        self._heard = time.monotonic()

    def due(self) -> bool:
        return self._ids is not None and time.monotonic() - self._heard >= self._quiet_s

    def wait_s(self, longest: float) -> float:
        """How long the idle engine may sleep before a step is due."""
        if self._ids is None:
            return longest
        return min(longest, max(0.0, self._heard + self._quiet_s - time.monotonic()) + 0.001)

    def step(self) -> int:
        """On the engine thread, while it is idle: encode the next chunk of the wanted context
        onto its longest cached start. Returns the tokens encoded (0: nothing left)."""
        ids = self._ids
        if ids is None:
            return 0
        done = _cached(self._runner, ids)
        if done >= ids.numel():
            self._ids = None
            return 0
        end = min(ids.numel(), done + self._chunk)
        self._ids = None  # a chunk that raises is not tried again at every idle moment
        self._runner.encode_tokens(ids[:end])
        if end < ids.numel() and self._ids is None:
            self._ids = ids
        self.encoded += end - done
        return end - done
