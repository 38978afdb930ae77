"""`dllm/prepareCompletion`: the cursor rests at a place; encode its context before the user types.

The first request at a new place encodes its whole context before its first pass (the
context starts with the suffix, so a cursor that moves shares nothing cached): 0.25-1.4 s of
a 2-core CPU for 600-1,000 tokens, the slowest answer a user meets. An editor knows where the cursor is before the
user types there; our clients send this notification once the cursor has rested at a place
(VS Code: a click or a cursor key, then 250 ms without another; Neovim: at rest in Normal mode
the end of the cursor's line, where `A` and `o` start, and in Insert mode a move that is not
typing), and
the server has the engine encode the context a completion there would carry (prepare.py in
the engine). The first keystroke's request then finds all but its last tokens cached.

A notification gets no answer. One prepare runs at a time: a newer notification, any request
that needs the engine (suggest.py) and a change of settings cancel it, and the engine stops on
its own for any request (between chunks of 128 tokens). A prepare cancels the next line's
prefetch (the user moved away from the place it guessed). Nothing is prepared for a stale
version, a place outside the document, a language whose completions are off, or an OpenAI
endpoint (nothing of ours to warm); the last place that came while the model loads is prepared
once it is in. Bad params are logged and ignored.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from .conversions import InvalidPosition
from .next_edit.params import InvalidParams, Position, VersionedDocument, parse

if TYPE_CHECKING:
    from .server import DllmServer

log = logging.getLogger(__name__)

PREPARE_COMPLETION = "dllm/prepareCompletion"


class PrepareParams(BaseModel):
    # Strict as every custom method's params (next_edit/params.py); a client's extra fields are ignored.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    textDocument: VersionedDocument
    position: Position


@dataclass
class PrepareStats:
    started: int = 0
    complete: int = 0  # the whole context is cached now
    stopped: int = 0  # the engine stopped for a request (which encodes the rest) or the place was left
    skipped: int = 0  # stale version, bad position, completions off, no engine to prepare
    invalid: int = 0  # params that failed validation
    prefetching: int = 0  # at the end of an accepted suggestion, whose next line is being prefetched
    tokens_encoded: int = 0
    tokens_cached: int = 0  # already in the cache when a prepare started

    def to_json(self) -> dict[str, int]:
        return {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): v for k, v in asdict(self).items()}


class CursorPrepare:
    def __init__(self, ls: "DllmServer") -> None:
        self.ls = ls
        self.stats = PrepareStats()
        self._task: asyncio.Task | None = None
        self._unsupported = False
        self._waiting: tuple[str, int, int, int] | None = None

    def enabled(self) -> bool:
        opts = self.ls.options
        return (opts.enable and opts.prepare_at_cursor and opts.engine.mode != "openai"
                and self.ls.engine.enabled and not self._unsupported)

    def notified(self, raw: Any) -> None:
        try:
            p = parse(PrepareParams, raw)
        except InvalidParams as exc:
            self.stats.invalid += 1
            log.warning("%s with invalid params (ignored): %s", PREPARE_COMPLETION, exc)
            return
        self.at(p.textDocument.uri, p.textDocument.version, p.position.line, p.position.character)

    def at(self, uri: str, version: int, line: int, character: int) -> None:
        """The cursor rests at (line, character) of version `version` of `uri`."""
        from lsprotocol import types

        from .infill import language_enabled, resting_windows

        self.cancel()
        if not self.enabled():
            return
        if self.ls.engine.status.state == "loading":
            # The file that opened the editor is where the user starts: prepared once the model is in.
            self._waiting = (uri, version, line, character)
            return
        doc = self.ls.documents.get(uri)
        if doc is None or doc.version != version or not language_enabled(doc, self.ls.options):
            self.stats.skipped += 1
            return
        try:
            offset = doc.index.offset(types.Position(line=line, character=character), self.ls.encoding)
        except InvalidPosition as exc:
            self.stats.skipped += 1
            log.info("%s at an invalid position in %s: %s", PREPARE_COMPLETION, uri, exc)
            return
        if self.ls.prefetch.guessed_from(uri, doc.text, offset):
            # The end of a suggestion just accepted (Neovim's Esc after Tab rests there): the
            # prefetch is filling the next line, a longer context than this one; leave it be.
            self.stats.prefetching += 1
            return
        try:
            prefix, suffix = resting_windows(doc, offset, self.ls.options, self.ls.documents.texts())
        except Exception:  # a bug in context extraction costs one prepare, not the server
            self.stats.skipped += 1
            log.exception("context extraction failed for %s at %s:%d", PREPARE_COMPLETION, uri, offset)
            return
        # The cursor moved by a click or a key: the next line's prefetch guessed the user would
        # accept a suggestion and press Enter where they were, and the engine is needed here.
        self.ls.prefetch.cancel_all()
        self.stats.started += 1
        self._task = asyncio.ensure_future(self._prepare(prefix, suffix))
        self._task.add_done_callback(self._done)

    def engine_ready(self) -> None:
        """The model is loaded: prepare the last place the cursor rested at while it loaded."""
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            self.at(*waiting)

    def cancel(self) -> None:
        """A request needs the engine, or the cursor moved on: stop before the next chunk."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    async def _prepare(self, prefix: str, suffix: str) -> None:
        from dllm_engine.prepare import PrepareRequest

        try:
            result = await self.ls.engine.prepare(PrepareRequest(prefix=prefix, suffix=suffix))
        except NotImplementedError as exc:  # this engine keeps no context of ours: stop asking
            self._unsupported = True
            log.info("no context preparation: %s", exc)
            return
        except asyncio.CancelledError:
            self.stats.stopped += 1
            raise
        if result is None:
            self.stats.skipped += 1
            return
        self.stats.tokens_encoded += result.encoded_tokens
        self.stats.tokens_cached += result.cached_tokens
        if result.complete:
            self.stats.complete += 1
        else:
            self.stats.stopped += 1

    def _done(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", PREPARE_COMPLETION, exc_info=task.exception())


def register(ls: "DllmServer") -> None:
    @ls.feature(PREPARE_COMPLETION)
    def on_prepare(raw: Any) -> None:  # pygls marks the function it registers: not a bound method
        ls.cursor_prepare.notified(raw)
