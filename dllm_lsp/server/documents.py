"""Open documents: text, version, language and syntax tree, kept in step with the client.

pygls keeps its own copy of each document too; this store exists because the
syntax tree needs every change *as it happens* (byte offsets and points before
and after), while pygls only shows handlers the text after all of a
notification's changes. Changes are applied in order on the event loop, so a
request handler always sees a consistent snapshot (text + tree + version).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types

from .conversions import Encoding, InvalidPosition, LineIndex, scrub_surrogates

log = logging.getLogger(__name__)

# Beyond this many characters a document gets no syntax tree and no scoring:
# context falls back to plain lines and completion stays cheap.
HUGE_DOCUMENT_CHARS = 2_000_000


@dataclass
class Document:
    uri: str
    language_id: str
    version: int
    text: str
    language: Any = None  # syntax.languages.LanguageSpec or None (unknown: line-based context)
    tree: Any = None  # syntax.document_tree.DocumentTree or None
    _index: LineIndex | None = field(default=None, repr=False)

    @property
    def index(self) -> LineIndex:
        if self._index is None or self._index.text is not self.text:
            self._index = LineIndex(self.text)
        return self._index

    @property
    def syntax_language(self) -> Any:
        """The language for syntax work; None (plain lines) for a huge document, never parsed."""
        return None if self.huge else self.language

    @property
    def huge(self) -> bool:
        return len(self.text) > HUGE_DOCUMENT_CHARS

    def edited(self, start: int, end: int, inserted: str) -> "Document":
        """A detached copy with text[start:end] replaced (its tree updated incrementally): the
        document an edit would make, for planning ahead of it; the store never sees it."""
        text = self.text[:start] + inserted + self.text[end:]
        tree = self.tree.edited(start, end, inserted) if self.tree is not None else None
        return Document(self.uri, self.language_id, self.version, text, self.language, tree)

    def apply_change(self, change: types.TextDocumentContentChangeEvent, encoding: Encoding) -> None:
        text = scrub_surrogates(change.text)
        if isinstance(change, types.TextDocumentContentChangeWholeDocument) or getattr(change, "range", None) is None:
            self.text = text
            self._rebuild_tree()
            return
        start, end = self.index.offsets(change.range, encoding)
        old = self.text
        new = old[:start] + text + old[end:]
        if self.tree is not None:
            try:
                self._edit_tree(old, new, start, end, start + len(text))
            except Exception:  # a tree bug must not lose the user's text: reparse from scratch
                log.exception("incremental tree edit failed for %s; reparsing", self.uri)
                self.text = new
                self._rebuild_tree()
                return
        self.text = new
        if self.tree is not None and self.huge:
            self.tree = None

    def _edit_tree(self, old: str, new: str, start: int, old_end: int, new_end: int) -> None:
        self.tree.replace(start, old_end, new[start:new_end])

    def _rebuild_tree(self) -> None:
        self.tree = make_tree(self.language, self.text) if not self.huge else None


def make_tree(language: Any, text: str) -> Any:
    if language is None:
        return None
    from ..syntax.document_tree import DocumentTree

    try:
        return DocumentTree(text, language)
    except Exception:
        log.exception("could not parse the document as %s; using line-based context", getattr(language, "name", "?"))
        return None


def detect_language(uri: str, language_id: str | None) -> Any:
    from ..syntax.languages import language_for

    try:
        return language_for(uri, language_id)
    except Exception:
        log.exception("language detection failed for %s", uri)
        return None


class DocumentStore:
    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}

    def open(self, item: types.TextDocumentItem) -> Document:
        language = detect_language(item.uri, item.language_id)
        doc = Document(item.uri, item.language_id, item.version, scrub_surrogates(item.text), language)
        doc._rebuild_tree()
        self._docs[item.uri] = doc
        return doc

    def change(self, params: types.DidChangeTextDocumentParams, encoding: Encoding) -> Document | None:
        doc = self._docs.get(params.text_document.uri)
        if doc is None:
            log.warning("didChange for a document that is not open: %s", params.text_document.uri)
            return None
        for change in params.content_changes:
            try:
                doc.apply_change(change, encoding)
            except InvalidPosition as exc:
                # The client's view and ours disagree; nothing sensible can be applied after this.
                log.error("dropping a change to %s: %s", doc.uri, exc)
                break
        doc.version = params.text_document.version
        return doc

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def texts(self) -> dict[str, str]:
        """Open documents' text by URI (cross-file snippets are taken from these)."""
        return {uri: d.text for uri, d in self._docs.items() if not d.huge}
