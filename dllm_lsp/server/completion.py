"""textDocument/completion: one item whose textEdit inserts the suggestion at the cursor."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from .conversions import LineIndex
from .suggest import suggest

if TYPE_CHECKING:
    from .server import DllmServer

log = logging.getLogger(__name__)

LABEL_CHARS = 60


def register(ls: "DllmServer") -> None:
    # Few trigger characters: a space or newline would pop the completion list open at every
    # word; ghost text (inline completion) is the main path, this list is for other clients.
    @ls.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "("]))
    async def on_completion(params: types.CompletionParams) -> types.CompletionList:
        empty = types.CompletionList(is_incomplete=True, items=[])
        if not ls.options.completion:
            return empty
        found = await suggest(ls, params.text_document.uri, params.position, "completion")
        if found is None:
            return empty
        suggestion, index = found
        return types.CompletionList(is_incomplete=True, items=[to_item(suggestion, index, ls.encoding)])


def to_item(suggestion, index: LineIndex, encoding) -> types.CompletionItem:
    start = index.position(suggestion.offset, encoding)
    end = index.position(suggestion.replace_end, encoding)
    if end.line != start.line:
        # A completion item's edit must stay on the cursor's line: keep the closers, insert only.
        end = start
    first_line = suggestion.text.strip().splitlines()[0] if suggestion.text.strip() else suggestion.text
    label = first_line if len(first_line) <= LABEL_CHARS else first_line[: LABEL_CHARS - 1] + "\u2026"
    return types.CompletionItem(
        label=label,
        kind=types.CompletionItemKind.Snippet,
        detail="dllm",
        documentation=types.MarkupContent(kind=types.MarkupKind.PlainText, value=suggestion.text),
        sort_text="0",
        # The edit starts at the cursor, so the client's filter word is empty and the item shows.
        filter_text="",
        insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=types.Range(start=start, end=end), new_text=suggestion.text),
    )
