"""Work from other threads run on the engine's own thread, between its passes.

Why one thread does all of the model's work (loading included): torch's CPU ops run in
OpenMP, and libgomp gives every thread that opens a parallel region its own team of worker
threads, kept while that thread lives. With the model loaded on the caller's thread and run
on the engine's, a 2-core machine had two teams (four threads libgomp manages for two
CPUs). The default model's pass over a cached context took 49 ms that way against 29 ms
with one team (benchmarks/RESULTS.md, eleventh session), and one team under
OMP_WAIT_POLICY=passive took 49 ms too: a pass is ~600 small ops back to back, each waking
the team, and the likely cause is libgomp cutting its workers' spin-wait short when it
manages more threads than there are CPUs (its "throttled" spin count).
Scoring and next edit ran their forwards on the calling thread (a daemon's or language
server's pool thread), which made yet more teams. Here they queue for the engine thread
instead, which serves them between passes, as the lock they used to take did.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Callable, TypeVar

from .engine_activity import ActivityLog

T = TypeVar("T")

IDLE_POLL_S = 0.02  # how often work that waits for the engine to go idle looks again


class EngineCalls:
    """Calls queued for the thread that owns the model (`owner`), served by its loop."""

    def __init__(self, cond: threading.Condition, activity: ActivityLog | None = None) -> None:
        self._cond = cond  # the engine loop's: a queued call wakes it like a request does
        self._pending: deque[tuple[Callable[[], object], Future, str]] = deque()
        self._activity = activity or ActivityLog()  # each call's span, under its caller's kind
        self._closed = False
        self.owner: threading.Thread | None = None
        # Calls served so far: work done like passes, so the heap trimmer sees a next-edit or
        # scoring burst (heap_trim.py), which runs no pass at all.
        self.served = 0

    def call(self, fn: Callable[[], T], kind: str = "calls") -> T:
        """fn() on the owner thread; its result or its exception here. From the owner thread
        itself (a callback of a pass) fn runs at once: waiting for itself would never end.
        `kind` names the work in the engine's activity log (engine_activity.py)."""
        if threading.current_thread() is self.owner:
            return fn()
        done: Future = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("engine is shut down")
            self._pending.append((fn, done, kind))
            self._cond.notify()
        return done.result()

    def call_when_idle(self, fn: Callable[[], T], idle: Callable[[], bool], patience_s: float,
                       kind: str = "calls") -> T:
        """fn() on the owner thread once `idle()` holds there, or `patience_s` from now whatever
        the load: background work (scoring for hints) yields to requests waiting or running,
        yet a steady stream of them does not starve it. Each look is one queued call."""
        if threading.current_thread() is self.owner:
            return fn()
        deadline = time.monotonic() + patience_s
        while True:
            ran, value = self.call(lambda: (True, fn()) if idle() or time.monotonic() >= deadline else (False, None),
                                   kind)
            if ran:
                return value
            time.sleep(IDLE_POLL_S)

    def pending(self) -> bool:
        return bool(self._pending)  # read under the engine's condition

    def run_pending(self) -> None:
        """On the owner thread: every call queued so far, in order; each one's exception goes
        to its caller, never into the loop."""
        while True:
            with self._cond:
                if not self._pending:
                    return
                fn, done, kind = self._pending.popleft()
            if not done.set_running_or_notify_cancel():
                continue
            self.served += 1
            with self._activity.span(kind):
                try:
                    done.set_result(fn())
                except BaseException as exc:  # the caller's error, raised in the caller
                    done.set_exception(exc)

    def close(self, exc: BaseException) -> None:
        """No more calls; those still queued fail with `exc`."""
        with self._cond:
            self._closed = True
            left, self._pending = list(self._pending), deque()
        for _, done, _ in left:
            if done.set_running_or_notify_cancel():
                done.set_exception(exc)
