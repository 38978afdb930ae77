"""Keystroke requests: debounce, per-document supersession, cancellation, statistics.

Each completion request for a document runs as its own asyncio task. A newer
request for the same document cancels the older task: during the debounce
sleep nothing reached the engine yet; during the engine await, cancelling the
task cancels the engine request (the clients turn a cancelled await into an
engine-side cancel, which stops the denoising loop between passes). The
superseded handler still answers its request, with an empty result: exactly
one response per request. A `$/cancelRequest` cancels the handler's task, and
pygls answers it with RequestCancelled; awaiting the work task propagates that
cancellation into the work as well.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import asdict, dataclass
from typing import Awaitable, Callable, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class SchedulerStats:
    submitted: int = 0
    completed: int = 0
    superseded: int = 0  # replaced by a newer request for the same document
    superseded_in_debounce: int = 0  # of which never reached the engine
    superseded_in_engine: int = 0  # of which were cancelled while the engine worked on them
    client_cancelled: int = 0  # $/cancelRequest
    cache_hits: int = 0
    unsure_hidden: int = 0  # fills the engine ended unsure (Hole.min_token_prob), not shown
    unsure_cut: int = 0  # multi-line fills it ended unsure, shown up to their last complete line

    def count_unsure(self, shown: bool) -> None:
        if shown:
            self.unsure_cut += 1
        else:
            self.unsure_hidden += 1

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class _Work:
    """One request's background task and where it is (debounce or engine)."""

    __slots__ = ("task", "phase")

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.phase = "debounce"


class RequestScheduler:
    def __init__(self, debounce_s: float = 0.075) -> None:
        self.debounce_s = debounce_s
        self.stats = SchedulerStats()
        self._current: dict[str, _Work] = {}
        # Request arrival to engine answer, for requests the engine answered: the server-side
        # keystroke latency, whether or not shaping kept the answer, with the engine's own
        # breakdown (queue, passes, context tokens encoded) so a slow answer says why.
        self.engine_answers: deque[dict] = deque(maxlen=2000)

    def supersede(self, key: str) -> None:
        """Cancel the running request for `key` (a newer one replaces it)."""
        work = self._current.pop(key, None)
        if work is not None and work.task is not None and not work.task.done():
            self.stats.superseded += 1
            if work.phase == "debounce":
                self.stats.superseded_in_debounce += 1
            else:
                self.stats.superseded_in_engine += 1
            work.task.cancel()

    async def run(self, key: str, work_fn: Callable[[], Awaitable[T]], debounce: bool = True) -> T | None:
        """Run `work_fn` after the debounce unless superseded; None when superseded."""
        self.supersede(key)
        self.stats.submitted += 1
        work = _Work()

        async def body() -> T:
            if debounce and self.debounce_s > 0:
                await asyncio.sleep(self.debounce_s)
            work.phase = "engine"
            return await work_fn()

        work.task = asyncio.ensure_future(body())
        self._current[key] = work
        try:
            result = await work.task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():  # $/cancelRequest (or shutdown): propagate
                self.stats.client_cancelled += 1
                raise
            return None  # superseded: the handler answers with an empty result
        finally:
            if self._current.get(key) is work:
                del self._current[key]
        self.stats.completed += 1
        return result

    def busy(self, key: str) -> bool:
        """Whether a request for `key` is pending (next edits wait for the cursor's own request)."""
        work = self._current.get(key)
        return work is not None and work.task is not None and not work.task.done()

    def cancel_all(self) -> None:
        for key in list(self._current):
            self.supersede(key)
