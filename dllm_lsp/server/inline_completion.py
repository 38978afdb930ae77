"""textDocument/inlineCompletion (LSP 3.18): ghost text at the cursor.

Each item carries a `range`: empty at the cursor for a pure insertion, or the
span of closers after the cursor that the suggestion replaces. Without a range
VS Code treats the item as an edit of the word under the cursor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from .suggest import suggest

if TYPE_CHECKING:
    from .server import DllmServer


def register(ls: "DllmServer") -> None:
    # The options argument is what makes pygls advertise the capability.
    @ls.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def on_inline_completion(params: types.InlineCompletionParams) -> types.InlineCompletionList:
        empty = types.InlineCompletionList(items=[])
        if not ls.options.inline_completion:
            return empty
        invoked = params.context is not None and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        found = await suggest(ls, params.text_document.uri, params.position, "inline", invoked=invoked)
        if found is None:  # no completion at the cursor: a next edit starting on its line, if any
            item = ls.next_edits.inline_item(params.text_document.uri, params.position) if ls.next_edits else None
            return types.InlineCompletionList(items=[item] if item is not None else [])
        suggestion, index = found
        # The best first; best of N's other fills after it (VS Code offers them as 1/N, 2/N).
        return types.InlineCompletionList(items=[
            types.InlineCompletionItem(insert_text=s.text, range=index.range(s.offset, s.replace_end, ls.encoding))
            for s in (suggestion, *suggestion.others)])
