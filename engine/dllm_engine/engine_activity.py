"""What the engine thread did lately, so a request's time in the queue says what it waited for.

A request waits from its submission until the engine admits it, and the engine thread does one
thing at a time: a denoising pass of the requests already running, the context encoding of
others admitted before it, or a call from another thread (background scoring for hints, a
cursor's prepare, next edit's forwards). The keystroke replay's slowest single-line answers
spent 0.1-1.3 s in the queue, and `queued_ms` alone could not tell which of these held them.
Each activity is recorded as a span (kind, start, end) on the engine thread; at admission the
spans that overlap the request's wait are summed per kind (`InfillResult.queued_for`).
"""

from __future__ import annotations

import time
from collections import deque
from contextlib import contextmanager
from typing import Iterator

# Spans kept: a request queued for seconds behind passes (~25 a second) and idle polls of
# background work (~50 a second) overlaps a few hundred; older ones only matter to nobody.
KEEP_SPANS = 2048


class ActivityLog:
    """Spans of the engine thread's work; written and read on the engine thread only."""

    def __init__(self, keep: int = KEEP_SPANS) -> None:
        self._spans: deque[tuple[str, float, float]] = deque(maxlen=keep)
        self._open: list[tuple[str, float]] = []  # spans begun and not ended (a request ends inside a pass)

    def record(self, kind: str, start: float, end: float) -> None:
        self._spans.append((kind, start, end))

    @contextmanager
    def span(self, kind: str) -> Iterator[None]:
        self._open.append((kind, time.monotonic()))
        try:
            yield
        finally:
            kind, start = self._open.pop()
            self.record(kind, start, time.monotonic())

    def overlap(self, since: float, until: float) -> dict[str, float]:
        """Milliseconds of each kind of work between `since` and `until` (time.monotonic), the
        work under way at `until` included (the innermost span only: spans may nest)."""
        out: dict[str, float] = {}
        if self._open:
            kind, start = self._open[-1]
            if until > max(start, since):
                out[kind] = (until - max(start, since)) * 1000
        for kind, start, end in reversed(self._spans):
            if end <= since:
                break  # spans are recorded in order of their ends
            ms = (min(end, until) - max(start, since)) * 1000
            if ms > 0:
                out[kind] = out.get(kind, 0.0) + ms
        return {kind: round(ms, 3) for kind, ms in out.items()}
