"""Suspicious tokens: hint diagnostics where the model finds existing code very unlikely.

The model scores every token of a document in one pass; a token whose
probability is tiny while the model has a confident alternative becomes a Hint
diagnostic carrying that alternative, which `code_actions.quick_fix` offers as
a quick fix. Rate-limited per document and off for huge documents.

ENGINE HOOK, NOT WIRED YET: the engine protocol has no scoring endpoint (no
`score` on `dllm_engine.clients.EngineClient`, no `/v1/score` on the daemon).
`DiagnosticsRunner` calls `client.score(text)` when the client has it, and
otherwise publishes nothing (logged once). Expected shape, for the engine side:
`async score(text: str) -> list[{"start": int, "end": int, "probability": float,
"alternative": str, "alternativeProbability": float}]` with str offsets.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from lsprotocol import types

from .conversions import Encoding, LineIndex

if TYPE_CHECKING:
    from .server import DllmServer

log = logging.getLogger(__name__)

DIAGNOSTIC_SOURCE = "dllm"
MIN_INTERVAL_S = 2.0  # per document, between two scoring passes
MAX_CHARS = 100_000  # no scoring beyond this (one pass over the whole file)
MAX_DIAGNOSTICS = 20


@dataclass(frozen=True)
class SuspiciousToken:
    start: int  # str offsets of the token in the scored text
    end: int
    probability: float
    alternative: str
    alternative_probability: float


def select(tokens: Iterable[SuspiciousToken], max_probability: float = 0.01,
           min_alternative: float = 0.5) -> list[SuspiciousToken]:
    """Tokens worth a diagnostic: very unlikely, with a confident, different alternative."""
    keep = [t for t in tokens if t.probability <= max_probability and t.alternative_probability >= min_alternative]
    keep.sort(key=lambda t: t.probability)
    return sorted(keep[:MAX_DIAGNOSTICS], key=lambda t: t.start)


def to_diagnostics(text: str, tokens: Iterable[SuspiciousToken], encoding: Encoding) -> list[types.Diagnostic]:
    index = LineIndex(text)
    out = []
    for t in tokens:
        if not (0 <= t.start < t.end <= len(text)) or text[t.start:t.end] == t.alternative:
            continue
        out.append(types.Diagnostic(
            range=index.range(t.start, t.end, encoding),
            message=f"dllm finds '{text[t.start:t.end]}' unlikely here (p={t.probability:.3f}); "
                    f"maybe '{t.alternative}' (p={t.alternative_probability:.2f})",
            severity=types.DiagnosticSeverity.Hint,
            source=DIAGNOSTIC_SOURCE,
            data={"replacement": t.alternative},
        ))
    return out


class DiagnosticsRunner:
    def __init__(self, ls: "DllmServer") -> None:
        self.ls = ls
        self._tasks: dict[str, asyncio.Task] = {}
        self._last: dict[str, float] = {}
        self._said_unsupported = False

    def schedule(self, uri: str) -> None:
        if not self.ls.options.diagnostics or not self.ls.options.enable:
            return
        task = self._tasks.get(uri)
        if task is not None and not task.done():
            task.cancel()  # the text changed: the pending pass would score stale text
        self._tasks[uri] = asyncio.ensure_future(self._run(uri))

    def forget(self, uri: str) -> None:
        task = self._tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        self._last.pop(uri, None)

    async def _run(self, uri: str) -> None:
        wait = max(self.ls.options.debounce_ms / 1000, self._last.get(uri, 0.0) + MIN_INTERVAL_S - time.monotonic())
        await asyncio.sleep(wait)
        doc = self.ls.documents.get(uri)
        if doc is None or len(doc.text) > MAX_CHARS:
            return
        client = self.ls.engine.client
        score = getattr(client, "score", None)
        if score is None:
            if not self._said_unsupported and client is not None:
                log.info("suspicious-token diagnostics: the engine has no scoring endpoint yet")
                self._said_unsupported = True
            return
        text, version = doc.text, doc.version
        self._last[uri] = time.monotonic()
        try:
            raw: list[dict[str, Any]] = await asyncio.wait_for(score(text), 30)
            tokens = [SuspiciousToken(r["start"], r["end"], r["probability"], r["alternative"],
                                      r["alternativeProbability"]) for r in raw]
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("scoring %s failed: %s", uri, exc)
            return
        if doc.version != version:
            return
        self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=to_diagnostics(text, select(tokens), self.ls.encoding)))


def register(ls: "DllmServer") -> None:
    ls.diagnostics = DiagnosticsRunner(ls)
