"""Suspicious tokens: hint diagnostics where the model finds code the user changed very unlikely.

The engine scores every token of a span of code (`EngineClient.score`, `/v1/score` on the
daemon; engine/dllm_engine/scoring.py), with the code around it as context; a name whose
tokens are very unlikely where the model prefers a near spelling of it becomes a Hint
diagnostic carrying that spelling (misspelling.py), which `code_actions.quick_fix` offers
as a quick fix.

A document as opened is the baseline (`opened`); the lines that changed since the last pass
are scored (plus a few around them); earlier findings elsewhere are kept and shifted.
Rate-limited per document and off for huge documents. Engines that cannot score (an OpenAI
FIM endpoint) publish nothing, logged once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from lsprotocol import types

from .conversions import Encoding, LineIndex
from .misspelling import as_misspelling

if TYPE_CHECKING:
    from .server import DllmServer

log = logging.getLogger(__name__)

DIAGNOSTIC_SOURCE = "dllm"
MIN_INTERVAL_S = 2.0  # per document, between two scoring passes
# Scoring waits for the user to rest this long: it runs on the engine thread, and at the
# keystroke's own pause (the debounce) it met that keystroke's completion there, which waited
# for it (the keystroke replay's empty-body answers p95 ~530 -> ~1,250 ms). A completion is
# answered well within it (p50 ~80 ms a line, ~330 ms an empty body on 2 cores).
IDLE_S = 1.0
MAX_CHARS = 100_000  # no scoring beyond this (one pass over the whole file)
MAX_DIAGNOSTICS = 20
REGION_MAX_CHARS = 3000  # one scoring request (the engine takes up to 4000)
REGION_PAD_LINES = 3  # lines of changed-region padding on each side
PREFIX_CHARS, SUFFIX_CHARS = 2400, 1200  # context around the scored region (within the model's window)


@dataclass(frozen=True)
class SuspiciousToken:
    start: int  # str offsets of the token (a misspelling: of the whole name) in the scored text
    end: int
    probability: float
    alternative: str  # the text that would replace start:end
    alternative_probability: float
    misspelling: bool = False  # start:end is a name and `alternative` a near spelling of it


def suspicious_tokens(scores, offset: int, text: str) -> list[SuspiciousToken]:
    """The engine's token scores (TokenScore) as candidates, at `offset` in `text` (the document).

    Blank tokens are never candidates: where a span starts after a line break, or ends before
    the next line's indentation, its first and last tokens are ones the tokenizer never makes
    there (SmolLM2 merges a line break with the indentation after it), so the model finds them
    unlikely wherever they stand: most of the default model's hints on code as written
    (benchmarks/bench_scoring.py). Spacing is the formatter's business, not a typo.

    A token inside a name whose preferred alternative completes a near spelling of that name
    becomes a candidate for the whole name (`as_misspelling`): a typo spans several tokens
    (`queyr` is `qu`, `ey`, `r`), and the quick fix must replace the name, not put `query` in
    place of `qu`."""
    out = []
    for t in scores:
        if not t.text.strip():
            continue
        token = SuspiciousToken(offset + t.start, offset + t.end, t.prob, t.alternative, t.alternative_prob)
        out.append(as_misspelling(token, text))
    return out


def select(tokens: Iterable[SuspiciousToken], max_probability: float = 0.01, min_alternative: float | None = None,
           min_misspelling: float = 0.2) -> list[SuspiciousToken]:
    """Tokens worth a diagnostic, one per name (the least likely): very unlikely, with an
    alternative that spells the name nearly alike (a misspelling) at least `min_misspelling`
    likely, or any other alternative at least `min_alternative` likely (None: never).

    Why misspellings only by default (benchmarks/bench_scoring.py, 2 x 40 names of this
    repository, the default model's causal scores): a different name the model prefers was a
    guess, not a bug: any alternative at 0.01 / 0.5 (the rule before) made 119-128 hints on 40
    regions of code as written, for 8-10 of 40 wrong names flagged and 2-3 given back; misspellings
    alone 5-6 such hints, 13-25 of 40 typos flagged and 10-18 given back by the quick fix."""
    keep = [t for t in tokens if t.probability <= max_probability and (
        t.alternative_probability >= min_misspelling if t.misspelling
        else min_alternative is not None and t.alternative_probability >= min_alternative)]
    keep.sort(key=lambda t: t.probability)
    seen: list[SuspiciousToken] = []
    for t in keep:
        if not any(t.start < u.end and t.end > u.start for u in seen):
            seen.append(t)
    return sorted(seen[:MAX_DIAGNOSTICS], key=lambda t: t.start)


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


def changed_region(old: str | None, new: str) -> tuple[int, int] | None:
    """(start, end) offsets in `new` of whole lines covering what changed since `old`, padded, capped."""
    if old == new:
        return None
    if old is None:
        start, end = 0, min(len(new), REGION_MAX_CHARS)
    else:
        head = 0
        limit = min(len(old), len(new))
        while head < limit and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < limit - head and old[len(old) - 1 - tail] == new[len(new) - 1 - tail]:
            tail += 1
        start, end = head, len(new) - tail
    for _ in range(REGION_PAD_LINES + 1):
        start = new.rfind("\n", 0, max(0, start - 1)) + 1 if start > 0 else 0
    for _ in range(REGION_PAD_LINES + 1):
        nl = new.find("\n", end)
        end = len(new) if nl < 0 else nl + 1
    if end - start > REGION_MAX_CHARS:
        end = start + REGION_MAX_CHARS
        nl = new.rfind("\n", start, end)
        end = nl + 1 if nl > start else end
    return (start, end) if end > start else None


def merge_findings(kept: list[SuspiciousToken], old: str | None, new: str, region: tuple[int, int],
                   fresh: list[SuspiciousToken]) -> list[SuspiciousToken]:
    """Drop old findings in the re-scored region, shift the ones after it, add the fresh ones."""
    delta = len(new) - len(old or "")
    start, end = region
    out = []
    for t in kept:
        if t.end <= start:
            out.append(t)
        elif t.start >= end - delta:  # after the region in the old text
            out.append(SuspiciousToken(t.start + delta, t.end + delta, t.probability, t.alternative,
                                       t.alternative_probability))
    out += fresh
    return sorted(out, key=lambda t: t.start)


class DiagnosticsRunner:
    def __init__(self, ls: "DllmServer") -> None:
        self.ls = ls
        self._tasks: dict[str, asyncio.Task] = {}
        self._last: dict[str, float] = {}
        self._scored: dict[str, str] = {}  # the text of the last scoring pass
        self._findings: dict[str, list[SuspiciousToken]] = {}
        self._said_unsupported = False

    def opened(self, uri: str, text: str) -> None:
        """A document as opened is the baseline: only what is changed in it gets scored. The
        code as opened is the user's, and mostly right: scoring its head at open (the first
        3,000 characters, ~850-1,000 tokens) held the engine ~0.9 s while the first requests
        of the file waited (the keystroke replay's engine answers p95 159 -> 643 ms), for
        hints the user did not ask about."""
        self.forget(uri)
        self._scored[uri] = text

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
        self._scored.pop(uri, None)
        self._findings.pop(uri, None)

    async def _run(self, uri: str) -> None:
        wait = max(IDLE_S, self.ls.options.debounce_ms / 1000, self._last.get(uri, 0.0) + MIN_INTERVAL_S - time.monotonic())
        await asyncio.sleep(wait)
        doc = self.ls.documents.get(uri)
        if doc is None or len(doc.text) > MAX_CHARS:
            return
        client = self.ls.engine.client
        if client is None or self._said_unsupported:
            return
        text, version = doc.text, doc.version
        old = self._scored.get(uri)
        region = changed_region(old, text)
        if region is None:
            return
        start, end = region
        from dllm_engine.protocol import ScoreRequest  # no torch: the protocol module is plain dataclasses

        request = ScoreRequest(prefix=text[max(0, start - PREFIX_CHARS):start], span=text[start:end],
                               suffix=text[end:end + SUFFIX_CHARS], background=True)
        self._last[uri] = time.monotonic()
        try:
            result = await asyncio.wait_for(client.score(request), 30)
        except asyncio.CancelledError:
            raise
        except NotImplementedError:
            log.info("suspicious-token diagnostics: this engine cannot score tokens")
            self._said_unsupported = True
            return
        except Exception as exc:
            log.warning("scoring %s failed: %s", uri, exc)
            return
        if doc.version != version:
            return
        fresh = suspicious_tokens(result.tokens, start, text)
        findings = merge_findings(self._findings.get(uri, []), old, text, region, select(fresh))
        self._scored[uri], self._findings[uri] = text, findings
        self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=to_diagnostics(text, findings, self.ls.encoding)))


def register(ls: "DllmServer") -> None:
    ls.diagnostics = DiagnosticsRunner(ls)
