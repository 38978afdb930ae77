"""The next line's suggestion, filled while the user is still on this one.

A suggestion on screen is either typed through (answered from the suggestion cache, no
engine) or accepted; either way the user then presses Enter and the editor asks again at
the start of the next line, where the engine would start from nothing: a new context tail
and a whole fill, 0.2-0.8 s on a 2-core CPU. So once a suggestion is shown, the server plans
the request the editor will make after it (the suggestion accepted, Enter, the editor's
auto-indent: syntax/after_accept.py), fills it in the background while the engine is idle,
and puts the answer in the suggestion cache; when the editor asks there, the cache answers
at once. The engine's context cache keeps the encoded context too, so even a prefetch that
is cut short leaves the next request only its canvas to fill.

Copilot's ghost text does the same (its speculative request, made when a completion is shown,
for the document with the completion accepted); ours also presses Enter, since a line's
suggestion ends at its line end and the next request comes at the next line.

The prefetch never delays a keystroke: it goes to the engine at batch priority, one per
document, which the engine admits only while no keystroke's request runs (its context's
encoding is one forward nothing interrupts), and any request that needs the engine cancels
every prefetch first (the user moved on). A prefetch whose fill shaping drops leaves an empty entry: the request there answers
"nothing" at once rather than filling the same hole again. A wrong
guess (the user typed something else) costs one fill no request reads: the cache matches on
the exact text. Off for an OpenAI endpoint (each fill is a billed request).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from .suggestion_cache import CachedSuggestion

if TYPE_CHECKING:
    from .documents import Document
    from .infill import Suggestion
    from .server import DllmServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Running:
    place: tuple[str, int]  # the text and offset filled: the suggestion accepted, Enter pressed
    origin: tuple[str, int]  # the text and offset once the suggestion is accepted, before Enter
    task: asyncio.Task


@dataclass
class PrefetchStats:
    started: int = 0
    filled: int = 0  # answers put in the suggestion cache
    empty: int = 0  # the engine answered, shaping kept nothing (or no completion belongs there)
    cancelled: int = 0  # a request needed the engine first

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class NextLinePrefetch:
    def __init__(self, ls: "DllmServer") -> None:
        self.ls = ls
        self.stats = PrefetchStats()
        self._running: dict[str, _Running] = {}  # per document

    def enabled(self) -> bool:
        opts = self.ls.options
        return opts.prefetch_next_line and opts.engine.mode != "openai"

    def after(self, doc: "Document", text: str, suggestion: "Suggestion") -> None:
        """The user sees `suggestion` in `text` (the snapshot it was made for): fill the place
        after it in the background, unless that is cached or being filled already."""
        if not self.enabled() or doc.text != text:
            return
        from ..syntax.after_accept import after_enter  # the syntax layer loads after `initialize`

        edit = after_enter(text, suggestion.offset, suggestion.text, suggestion.replace_end, doc.syntax_language)
        if edit is None:
            return
        place = (text[:edit.start] + edit.text + text[edit.end:], edit.cursor)
        running = self._running.get(doc.uri)
        if running is not None and running.place == place and not running.task.done():
            return  # typing through the suggestion: the same place is being filled
        origin = (text[:suggestion.offset] + suggestion.text + text[suggestion.replace_end:],
                  suggestion.offset + len(suggestion.text))
        if self.ls.cache.has(doc.uri, *place):
            return
        ahead = doc.edited(edit.start, edit.end, edit.text)  # its tree: an incremental reparse, only now
        self.cancel(doc.uri)
        self.stats.started += 1
        task = asyncio.ensure_future(self._fill(ahead, edit.cursor))
        self._running[doc.uri] = _Running(place, origin, task)
        task.add_done_callback(lambda t, uri=doc.uri: self._forget(uri, t))

    async def join(self, uri: str, text: str, offset: int) -> bool:
        """If the prefetch of this document is filling this very place, wait for it (the user
        pressed Enter before it finished) and say so; the caller then reads the cache. A
        request cancelled meanwhile leaves the prefetch running for the next one."""
        running = self._running.get(uri)
        if running is None or running.place != (text, offset) or running.task.done():
            return False
        task = running.task
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled() and not asyncio.current_task().cancelling():
                return False  # the prefetch was cancelled, not this request
            raise
        return True

    def guessed_from(self, uri: str, text: str, offset: int) -> bool:
        """Whether the prefetch of this document is filling the line after this place: the end
        of the accepted suggestion, where the user presses Enter next (or leaves Insert mode
        and opens the line below: the same new line)."""
        running = self._running.get(uri)
        return running is not None and running.origin == (text, offset) and not running.task.done()

    def cancel(self, uri: str) -> None:
        """A request of this document needs the engine: stop the prefetch (between passes)."""
        running = self._running.pop(uri, None)
        if running is not None and not running.task.done():
            self.stats.cancelled += 1
            running.task.cancel()

    def cancel_all(self) -> None:
        for uri in list(self._running):
            self.cancel(uri)

    async def _fill(self, ahead: "Document", offset: int) -> None:
        from .infill import plan_completion, request_for, shape_fill

        ls = self.ls
        plan = plan_completion(ahead, offset, ls.options, ls.documents.texts())
        if plan is None:  # no completion belongs there: the request there answers at once anyway
            self.stats.empty += 1
            return
        result = await ls.engine.infill(request_for([plan.hole], ls.options, priority="batch"), background=True)
        if result is None or not result.holes:
            return  # no answer (the engine loading, failing or busy): the request there asks again
        suggestion = shape_fill(plan, result.holes[0])
        if suggestion is None:
            # Kept as an empty entry: the request there answers "nothing" at once instead of
            # filling the same hole again for the same nothing.
            self.stats.empty += 1
            ls.cache.put(ahead.uri, plan.text, offset, CachedSuggestion("", 0, prefetched=True))
            return
        self.stats.filled += 1
        ls.cache.put(ahead.uri, plan.text, offset,
                      CachedSuggestion(suggestion.text, suggestion.replace_end - offset, prefetched=True))

    def _forget(self, uri: str, task: asyncio.Task) -> None:
        running = self._running.get(uri)
        if running is not None and running.task is task:
            del self._running[uri]
        if not task.cancelled() and task.exception() is not None:
            log.error("next-line prefetch failed for %s", uri, exc_info=task.exception())
