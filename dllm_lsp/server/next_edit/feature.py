"""Next edits in the server: didChange -> (debounce) -> region -> engine -> filters -> proposal.

Each didChange drops the document's proposal and cancels its pending computation
(the next keystroke always wins), records the edit, and starts a new computation
after `nextEdit.debounceMs`, which waits for the cursor's own completion request
first (next edits rank below inline completion). The proposal is kept for the
document version it was computed on; a proposal for an older version is never
given out. `dllm/nextEdit` answers with it (waiting for a pending one, or
computing one), and inline completion shows it where it starts on the cursor's
line and no completion at the cursor answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ..scheduler import RequestScheduler
from ..suggest import typing_key
from .filters import Replacement, apply, confident, drop_reason, signature
from .pipeline import replacements_of
from .history import EditHistory
from .params import EditFeedbackParams, InvalidParams, NextEditParams, parse

if TYPE_CHECKING:
    from ..documents import Document
    from ..server import DllmServer

log = logging.getLogger(__name__)

NEXT_EDIT, ACCEPT_EDIT, REJECT_EDIT = "dllm/nextEdit", "dllm/acceptEdit", "dllm/rejectEdit"
WAIT_FOR_COMPLETION_S = 2.0
MAX_REJECTED = 64


@dataclass(frozen=True)
class Proposal:
    uri: str
    version: int
    text: str  # the document the replacements refer to
    replacements: tuple[Replacement, ...]


class NextEdits:
    def __init__(self, ls: "DllmServer") -> None:
        self.ls = ls
        self.history = EditHistory()
        # Its own scheduler: a next edit never supersedes, nor is counted with, completions.
        self.scheduler = RequestScheduler(0.0)
        self.proposals: dict[str, Proposal] = {}
        self.pending: dict[str, tuple[int, asyncio.Future]] = {}
        self.rejected: dict[str, set] = {}
        self.stats: Counter = Counter()
        self._said_unsupported = False

    @property
    def enabled(self) -> bool:
        return self.ls.options.enable and self.ls.options.next_edit.enabled and not self._said_unsupported

    # ------------------------------------------------------------ document sync

    def changed(self, doc: "Document", old_text: str) -> None:
        self.proposals.pop(doc.uri, None)
        self.scheduler.supersede(doc.uri)
        self.pending.pop(doc.uri, None)
        if not self.enabled:
            return
        if doc.huge:  # a diff of two huge texts per keystroke is not worth a proposal
            self.history.forget(doc.uri)
            return
        if self.history.record(doc.uri, old_text, doc.text) is None:
            return
        self.scheduler.debounce_s = self.ls.options.next_edit.debounce_ms / 1000
        self._start(doc.uri, doc.version, None, debounce=True)

    def forget(self, uri: str) -> None:
        self.scheduler.supersede(uri)
        for table in (self.proposals, self.pending, self.rejected):
            table.pop(uri, None)
        self.history.forget(uri)

    def _start(self, uri: str, version: int, cursor: int | None, debounce: bool) -> asyncio.Future:
        future = asyncio.ensure_future(self.scheduler.run(uri, lambda: self._compute(uri, version, cursor), debounce))
        self.pending[uri] = (version, future)
        future.add_done_callback(lambda f: self.pending.pop(uri, None) if self.pending.get(uri, (0, f))[1] is f else None)
        return future

    # --------------------------------------------------------------- compute

    def _current(self, uri: str, version: int) -> "Document | None":
        doc = self.ls.documents.get(uri)
        return doc if doc is not None and doc.version == version else None

    async def _compute(self, uri: str, version: int, cursor: int | None) -> Proposal | None:
        from ..infill import params
        from .pipeline import plan_request

        loop = asyncio.get_running_loop()
        until = loop.time() + WAIT_FOR_COMPLETION_S
        while (self.ls.scheduler.busy(typing_key("inline")) or self.ls.scheduler.busy(typing_key("completion"))) \
                and loop.time() < until:
            await asyncio.sleep(0.02)  # the cursor's own request goes to the engine first
        doc = self._current(uri, version)
        if doc is None:
            return None
        text, opts = doc.text, self.ls.options.next_edit
        tree = doc.tree.tree if doc.tree is not None and doc.syntax_language is not None else None
        planned = plan_request(text, tree, doc.syntax_language, self.history.recent(uri), cursor, opts.max_lines,
                               params(self.ls.options))
        if planned is None:
            return None
        request, base, last, removed = planned
        self.stats["requested"] += 1
        try:
            result = await self.ls.engine.next_edit(request)
        except NotImplementedError as exc:
            self._said_unsupported = True
            log.warning("next edits are off: %s", exc)
            return None
        if result is None:
            return None
        if self._current(uri, version) is not doc:
            self.stats["stale"] += 1
            log.info("next edit for %s v%d dropped: the document changed meanwhile", uri, version)
            return None
        replacements = confident(replacements_of(result, base), opts.min_confidence)
        reason = drop_reason(text, replacements, last, self.history.text_before_last(uri), removed,
                             doc.syntax_language, opts.min_confidence, self.rejected.get(uri, set()))
        if reason is not None:
            self.stats[f"dropped: {reason.split(' ')[0]}"] += 1
            log.info("next edit for %s v%d not shown (%s): %r", uri, version, reason,
                     [(text[r.start:r.end], r.new) for r in replacements][:4])
            return None
        self.stats["proposed"] += 1
        proposal = Proposal(uri, version, text, tuple(sorted(replacements, key=lambda r: r.start)))
        self.proposals[uri] = proposal
        return proposal

    # --------------------------------------------------------------- deliver

    async def answer(self, uri: str, version: int, position: types.Position) -> list[dict[str, Any]]:
        doc = self._current(uri, version)
        if doc is None or not self.enabled:
            return []
        proposal = self.proposals.get(uri)
        if proposal is None or proposal.version != version:
            pending = self.pending.get(uri)
            if pending is not None and pending[0] == version:
                future = pending[1]
            else:
                try:
                    cursor = doc.index.offset(position, self.ls.encoding)
                except ValueError:
                    return []
                future = self._start(uri, version, cursor, debounce=False)
            try:
                proposal = await asyncio.shield(future)
            except asyncio.CancelledError:
                if future.cancelled():  # superseded by a keystroke: nothing for this version
                    return []
                raise
        if proposal is None or self._current(uri, version) is None:
            return []
        return [{"range": self.ls.protocol._converter.unstructure(doc.index.range(r.start, r.end, self.ls.encoding)),
                 "newText": r.new, "confidence": round(r.confidence, 4)} for r in proposal.replacements]

    def inline_item(self, uri: str, position: types.Position) -> types.InlineCompletionItem | None:
        """The proposal as one inline completion item (its range covers the text it replaces),
        when it starts on the cursor's line."""
        doc = self.ls.documents.get(uri)
        proposal = self.proposals.get(uri)
        if doc is None or proposal is None or proposal.version != doc.version:
            return None
        first, last = proposal.replacements[0], max(proposal.replacements, key=lambda r: r.end)
        if doc.index.position(first.start, self.ls.encoding).line != position.line:
            return None
        stretch = [Replacement(r.start - first.start, r.end - first.start, r.new, r.confidence)
                   for r in proposal.replacements]
        new = apply(doc.text[first.start:last.end], stretch)
        return types.InlineCompletionItem(insert_text=new, range=doc.index.range(first.start, last.end, self.ls.encoding))

    def feedback(self, uri: str, version: int, accepted: bool) -> None:
        proposal = self.proposals.pop(uri, None)
        self.stats["accepted" if accepted else "rejected"] += 1
        if proposal is None or accepted:
            return
        rejected = self.rejected.setdefault(uri, set())
        if len(rejected) >= MAX_REJECTED:
            rejected.clear()
        rejected.add(signature(proposal.text, list(proposal.replacements)))


def register(ls: "DllmServer") -> None:
    ls.next_edits = NextEdits(ls)

    @ls.feature(NEXT_EDIT)
    async def on_next_edit(raw: Any) -> list[dict[str, Any]]:
        try:
            p = parse(NextEditParams, raw)
        except InvalidParams as exc:
            raise JsonRpcInvalidParams(f"{NEXT_EDIT}: {exc}") from None
        position = types.Position(line=p.position.line, character=p.position.character)
        return await ls.next_edits.answer(p.textDocument.uri, p.textDocument.version, position)

    def feedback(method: str, accepted: bool):
        def handler(raw: Any) -> None:
            try:
                p = parse(EditFeedbackParams, raw)
            except InvalidParams as exc:
                log.warning("%s with invalid params (ignored): %s", method, exc)
                return
            ls.next_edits.feedback(p.textDocument.uri, p.textDocument.version, accepted)

        ls.feature(method)(handler)

    feedback(ACCEPT_EDIT, True)
    feedback(REJECT_EDIT, False)
