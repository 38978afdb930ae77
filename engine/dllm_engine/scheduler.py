"""Request state and the scheduling policy: who joins the next denoising pass.

Continuous batching at pass granularity: holes join and leave between passes;
interactive requests are admitted before batch requests (and may use a few
slots beyond `max_batch`, so a keystroke never waits behind a refactor), and batch
holes are admitted only while no interactive request runs; the waiting queue is
bounded and answers `EngineBusy` rather than growing.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

import torch

from .protocol import CanvasEvent, EngineBusy, HoleResult, InfillRequest, SettledText
from .runner import EncodedContext

INTERACTIVE_EXTRA_SLOTS = 8


@dataclass
class RequestState:
    request: InfillRequest
    future: Future
    on_event: Callable[[CanvasEvent], None] | None
    on_settled: Callable[[SettledText], None] | None = None
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None
    # What the engine did while this request waited to be admitted: ms per kind of work
    # (engine_activity.py); the part of the wait it does not cover was spent idle or in between.
    queued_for: dict[str, float] = field(default_factory=dict)
    cancelled: threading.Event = field(default_factory=threading.Event)
    results: list[HoleResult | None] = field(default_factory=list)
    pending_holes: list[int] = field(default_factory=list)  # not yet admitted
    context_tokens: int = 0
    cached_tokens: int = 0
    near_holes: int = 0  # holes filled from the near part of their context (near_context.py)
    candidates: int = 1  # best of N: `request` holds each of `holes` n times (candidates.py)
    holes: list | None = None  # the caller's holes (None: request.holes)

    def __post_init__(self) -> None:
        self.results = [None] * len(self.request.holes)
        self.pending_holes = list(range(len(self.request.holes)))

    @property
    def deadline(self) -> float | None:
        d = self.request.deadline_s
        return self.submitted + d if d is not None else None

    @property
    def done(self) -> bool:
        return all(r is not None for r in self.results)


@dataclass
class ActiveHole:
    """One canvas being denoised (nano-vllm's Sequence)."""

    state: RequestState
    index: int
    context: EncodedContext
    canvas: torch.Tensor  # [L] token ids, mask where not yet committed
    max_tokens: int
    generator: torch.Generator | None
    temperature: float = 0.0  # the request's, or a best-of-N copy's own (candidates.sampling_for)
    passes: int = 0
    committed_per_pass: list[int] = field(default_factory=list)
    remask_budget: int = 0
    stop_ids: torch.Tensor | None = None  # bool [V]: tokens holding a stop string
    typed: str = ""  # trailing whitespace of the prefix moved into the hole (healing.py)
    indenting: bool = False  # `typed` is its line's whole start: deeper indentation is kept (healing.unheal)
    healed: str = ""  # the prefix's last word token, moved into the hole: the fill starts with it
    first_allowed: torch.Tensor | None = None  # bool [V]: tokens slot 0 may take while `healed` is set
    # bool [V]: the stop tokens at slot 0 of a healed hole (a stop in the healed text itself,
    # a healed line break under a "\n" stop, does not end the fill)
    first_stop_ids: torch.Tensor | None = None
    # The delayed canvas cache (params.canvas_cache == "delayed"): slots whose K/V are kept
    # from an earlier pass, and those K/V [layers, 2, Hkv, L, D]. None: recompute every slot.
    frozen: torch.Tensor | None = None
    canvas_kv: torch.Tensor | None = None
    # Draft rows (draft_adapter.py): the guesses of the last pass's draft rows, (first slot,
    # tokens), for the next pass to check when the text offers no draft.
    row_draft: tuple[int, list[int]] | None = None
    # The draft head (draft_head.py): its guesses after the newest committed token, (first
    # slot, chains of tokens, best first, the head's probability of each one's first token),
    # for the next pass to check (drafting.chains_for).
    head_draft: tuple[int, list[list[int]], list[float]] | None = None
    # Hole.stop_repeats: the head of the fill already checked and found without a loop
    # (repeat_stop.loop_seen), so a pass checks only the lines that are new.
    loop_clean: str = ""
    # Hole.stop_at_suffix: the suffix's head the fill must not write again (suffix_stop.py),
    # found once at admission, not every pass; None: no rule or nothing to repeat.
    suffix_head: str | None = None
    # Hole.choose_end where the engine chooses the fill's end (fill_end.chosen_end: "line
    # start", "line end" or fill_end.INSIDE), found once at admission: the fill ends once that
    # choice is settled (fill_end.settled_end). None: its end is not chosen.
    chosen_end: str | None = None
    # Hole.banned_starts (start_ban.py): bool [V] of the tokens banned where only blanks come
    # before; None once no masked slot has only blanks before it (or when the hole bans nothing).
    start_ban: torch.Tensor | None = None

    @property
    def params(self):
        return self.state.request.params


class Scheduler:
    def __init__(self, max_batch: int, max_queue: int) -> None:
        self.max_batch = max_batch
        self.max_queue = max_queue
        self._waiting: list[tuple[int, int, RequestState]] = []  # heap of (priority, seq, state)
        self._seq = itertools.count()
        # Callers submit from any thread; the engine thread admits and drops.
        self._lock = threading.RLock()
        self.active: list[ActiveHole] = []  # touched by the engine thread only

    @property
    def queue_depth(self) -> int:
        return len(self._waiting)

    def add(self, state: RequestState) -> None:
        with self._lock:
            if len(self._waiting) >= self.max_queue:
                raise EngineBusy(f"engine busy: {len(self._waiting)} requests waiting (max_queue {self.max_queue})")
            rank = 0 if state.request.priority == "interactive" else 1
            heapq.heappush(self._waiting, (rank, next(self._seq), state))

    def next_admissions(self) -> list[tuple[RequestState, int]]:
        """(request, hole index) pairs that may join the next pass, best first."""
        picked = []
        n_active = len(self.active)
        with self._lock:
            return self._pick(picked, n_active)

    def _pick(self, picked: list, n_active: int) -> list[tuple[RequestState, int]]:
        interactive = any(a.state.request.priority == "interactive" for a in self.active if hasattr(a, "state"))
        while self._waiting:
            rank, _, state = self._waiting[0]
            limit = self.max_batch + (INTERACTIVE_EXTRA_SLOTS if rank == 0 else 0)
            if n_active >= limit or (rank == 1 and interactive):
                # Batch work (a prefetch, a refactor's holes) waits while a keystroke's request
                # runs: admitting a hole encodes its context, one forward no request can
                # interrupt, and a fresh one took 0.9 s on 2 cores between a line's passes.
                break
            interactive = interactive or rank == 0
            hole = state.pending_holes.pop(0)
            picked.append((state, hole))
            n_active += 1
            if not state.pending_holes:
                heapq.heappop(self._waiting)
        return picked

    def drop_waiting(self, predicate: Callable[[RequestState], bool]) -> list[RequestState]:
        """Remove waiting requests matching `predicate` (cancelled, past deadline)."""
        with self._lock:
            dropped = [s for _, _, s in self._waiting if predicate(s)]
            if dropped:
                self._waiting = [e for e in self._waiting if not predicate(e[2])]
                heapq.heapify(self._waiting)
            return dropped

    def waiting_states(self) -> list[RequestState]:
        with self._lock:
            return [s for _, _, s in self._waiting]
