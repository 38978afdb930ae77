"""Encode a place's context before anyone asks for a fill there.

A native context starts with the suffix (`<suf> suffix <pre> prefix`), so a cursor that moves
to a new place shares nothing with any cached context and its first request encodes the whole
context before the first pass: ~0.35 s for 1,000 tokens on a 2-core AMX CPU, ~1.4 s on an AMD
EPYC (benchmarks/RESULTS.md, sixteenth and twenty-third sessions). An editor knows where the cursor rests before the
user types there; `prepare` encodes that place's context into the prefix cache while the user
is still reading, so the first keystroke's request finds all but its last few tokens cached.
(llama.vim's requests with `n_predict: 0` warm llama.cpp's prompt cache the same way.)

The encoding runs on the engine thread between passes, in chunks of PREPARE_CHUNK tokens, each
one appending to the cache entry the last one made. It never delays a request: before each
chunk it stops if a request is waiting or running (that request, if it is at this place, encodes
the rest itself from what is cached), and it stops when the caller cancels it (the cursor moved
on). At most one chunk is in flight when a request arrives.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .protocol import Hole, ProtocolError, _build

if TYPE_CHECKING:
    from .engine import Engine

# Tokens a chunk encodes: the most a request that arrives meanwhile waits for is one chunk's
# forward (~0.2 s for 128 tokens of the default model on 2 cores), and a chunk this long costs
# little more per token than the whole context at once (bench_cursor_prepare.py --chunks).
PREPARE_CHUNK = 128


@dataclass
class PrepareRequest:
    """The text before and after a place where a request may soon come (the cursor's)."""

    prefix: str
    suffix: str = ""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def validate(self) -> None:
        if not isinstance(self.prefix, str) or not isinstance(self.suffix, str):
            raise ProtocolError("prefix and suffix must be strings")
        if not isinstance(self.request_id, str) or not self.request_id:
            raise ProtocolError("request_id must be a non-empty string")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "PrepareRequest":
        req = _build(cls, data, "prepare request")
        req.validate()
        return req


@dataclass
class PrepareResult:
    request_id: str
    context_tokens: int  # the context a request at this place encodes (0: nothing to prepare)
    cached_tokens: int  # of those, in the cache before this call
    encoded_tokens: int  # encoded by this call
    # Every token of the context is cached now. False: stopped for a request or cancelled
    # half-way, or the model keeps no exact context cache (a bidirectional family).
    complete: bool
    elapsed_ms: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PrepareResult":
        return cls(**data)


def prepare_context(engine: "Engine", request: PrepareRequest, cancel: threading.Event | None = None,
                    chunk: int = PREPARE_CHUNK) -> PrepareResult:
    """Encode `request`'s context into the engine's prefix cache (from any thread but the
    engine's own; each step runs on the engine thread between passes)."""
    request.validate()
    start = time.perf_counter()
    runner = engine.runner

    def result(tokens: int, cached: int, encoded: int, complete: bool) -> PrepareResult:
        return PrepareResult(request.request_id, tokens, cached, encoded, complete,
                             round((time.perf_counter() - start) * 1000, 3))

    if not hasattr(runner, "encode_tokens"):  # a family runner: its context depends on the canvas
        return result(0, 0, 0, False)
    ids = engine.between_passes(lambda: context_ids(engine, request), "prepare")
    total = ids.numel()
    cached, done = encode_in_chunks(runner, ids, lambda fn: engine.between_passes(fn, "prepare"), chunk,
                                    encode=lambda head: _encode_unless_busy(engine, head), cancel=cancel)
    if done > cached:
        engine.metrics.context_encoded(done - cached)
    return result(total, cached, done - cached, done == total)


def encode_in_chunks(runner, ids, call, chunk: int, encode=None,
                     cancel: threading.Event | None = None) -> tuple[int, int]:
    """(tokens cached before, tokens cached now) of context `ids`, encoded onto its longest
    cached start `chunk` tokens per `call(fn)` (each on the engine thread), each chunk appending
    to the entry the one before made. `encode(head)` encodes ids[:end] and says whether it did
    (default: always); it stops there when it did not, or when `cancel` is set."""
    encode = encode or (lambda head: runner.encode_tokens(head) is not None)
    cached = call(lambda: runner.cache.lookup(ids, count=False, full=True)[2])
    done = cached
    while done < ids.numel():
        if cancel is not None and cancel.is_set():
            break
        end = min(ids.numel(), done + chunk)
        if not call(lambda end=end: encode(ids[:end])):
            break
        done = end
    return cached, done


def context_ids(engine: "Engine", request: PrepareRequest):
    """The tokens a request at this place would have cached: its context, tokenized and
    healed as admission does (engine._tokenize), less a shifted-logit model's held-out last token."""
    prefix_ids, suffix_ids, *_ = engine._tokenize(Hole(prefix=request.prefix, suffix=request.suffix, max_tokens=1))
    return engine.runner.cache_ids(prefix_ids, suffix_ids)


def _encode_unless_busy(engine: "Engine", ids) -> bool:
    """On the engine thread: encode `ids` (appending to the cached start), unless a request
    is waiting or running, which goes first."""
    if engine.scheduler.active or engine.scheduler.queue_depth:
        return False
    engine.runner.encode_tokens(ids)
    return True
