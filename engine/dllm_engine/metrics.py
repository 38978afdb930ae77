"""Counters behind GET /metrics and Engine.health(): queue depth, passes/s, tokens per pass, cache hits."""

from __future__ import annotations

import threading
import time
from collections import deque


class EngineMetrics:
    def __init__(self, window_s: float = 60.0) -> None:
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.passes = 0
        self.canvases_run = 0
        self.tokens_committed = 0
        self.pass_seconds = 0.0
        self.requests_done = 0
        self.requests_cancelled = 0  # by their caller: a client that went away mid-request
        self.context_tokens_encoded = 0
        self._recent = deque()  # (time, tokens) of recent passes, for passes/s
        self._window_s = window_s

    def pass_done(self, canvases: int, tokens: int, seconds: float) -> None:
        now = time.monotonic()
        with self._lock:
            self.passes += 1
            self.canvases_run += canvases
            self.tokens_committed += tokens
            self.pass_seconds += seconds
            self._recent.append((now, tokens))
            while self._recent and now - self._recent[0][0] > self._window_s:
                self._recent.popleft()

    def context_encoded(self, tokens: int) -> None:
        with self._lock:
            self.context_tokens_encoded += tokens

    def request_done(self, result) -> None:
        with self._lock:
            self.requests_done += 1

    def request_cancelled(self) -> None:
        with self._lock:
            self.requests_cancelled += 1

    def snapshot(self, queue_depth: int, active: int, cache) -> dict:
        with self._lock:
            span = max(1e-9, min(self._window_s, time.monotonic() - self.started))
            return {
                "queue_depth": queue_depth,
                "active_canvases": active,
                "passes": self.passes,
                "passes_per_s": round(len(self._recent) / span, 3),
                "tokens_per_pass": round(self.tokens_committed / self.canvases_run, 3) if self.canvases_run else 0.0,
                "mean_pass_ms": round(1000 * self.pass_seconds / self.passes, 3) if self.passes else 0.0,
                "requests_done": self.requests_done,
                "requests_cancelled": self.requests_cancelled,
                "context_tokens_encoded": self.context_tokens_encoded,
                "cache_hit_rate": round(cache.stats.hit_rate, 4),
                "cache_entries": len(cache),
                "cache_bytes": cache.nbytes,
                "cache_budget_bytes": getattr(cache, "max_bytes", None),  # family runners keep no context cache
            }
