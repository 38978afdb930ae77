"""Range edits: regenerate a selection, fill every placeholder. Both return a WorkspaceEdit.

The engine fills a re-masked span with both sides as context. An edit that
would add parse errors to the document is dropped (never corrupt the user's
file); the reason is logged and the caller hears "no edit".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from ..syntax.indentation import at_selection_depth
from ..syntax.parse_check import new_error_count
from .infill import engine_hole, plan_range, request_for

if TYPE_CHECKING:
    from .documents import Document
    from .server import DllmServer

log = logging.getLogger(__name__)

RANGE_TIMEOUT_S = 60.0


def _edit(doc: "Document", edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version),
        edits=edits,
    )])


def _keeps_parsing(doc: "Document", replacements: list[tuple[int, int, str]]) -> bool:
    if doc.syntax_language is None:
        return True  # no grammar (or a huge document): nothing to check against
    filled, last = [], 0
    for start, end, new in sorted(replacements):
        filled += [doc.text[last:start], new]
        last = end
    filled.append(doc.text[last:])
    return new_error_count(doc.text, "".join(filled), doc.language) == 0


async def regenerate_selection(ls: "DllmServer", uri: str, rng: types.Range) -> types.WorkspaceEdit | None:
    doc = ls.documents.get(uri)
    if doc is None:
        log.warning("regenerate: document not open: %s", uri)
        return None
    start, end = doc.index.offsets(rng, ls.encoding)  # InvalidPosition: the caller reports it
    version = doc.version
    _, hole = plan_range(doc, start, end, ls.options)
    result = await ls.engine.infill(request_for([hole], ls.options, "interactive", invoked=True), RANGE_TIMEOUT_S, wait_for_load=True)
    if result is None or not result.holes:
        return None
    if doc.version != version or ls.documents.get(uri) is not doc:
        log.info("regenerate: %s changed while the engine worked; dropping the edit", uri)
        return None
    # Best of N: the best-read fill, else the first of the others (best read first) that adds
    # no parse errors (the reading favours short fills, and one that breaks the file is never
    # the edit wanted while another parses: fill_choice.py).
    for text in (result.holes[0].text, *result.holes[0].alternatives):
        new = at_selection_depth(text, doc.text, start).replace("\r\n", "\n")
        if "\r\n" in doc.text:
            new = new.replace("\n", "\r\n")  # the engine works in LF; the document keeps its line ends
        if _keeps_parsing(doc, [(start, end, new)]):
            return _edit(doc, [types.TextEdit(range=rng, new_text=new)])
        log.info("regenerate: the fill for %s adds parse errors; dropping it: %r", uri, new[:120])
    return None


async def fill_holes(ls: "DllmServer", uri: str) -> types.WorkspaceEdit | None:
    """Fill every placeholder of the buffer in one batched engine request."""
    from ..refactor.apply import HoleFill
    from .placeholders import apply_fills, line_edits, plan_placeholders

    doc = ls.documents.get(uri)
    if doc is None:
        log.warning("fillHoles: document not open: %s", uri)
        return None
    plan = plan_placeholders(doc, ls.options)
    if plan is None:
        log.info("fillHoles: no placeholders in %s", uri)
        return None
    version = doc.version
    holes = [engine_hole(h.ctx, doc.language, h.ctx.max_tokens, h.ctx.bucket) for h in plan.holes]
    result = await ls.engine.infill(request_for(holes, ls.options, "interactive", invoked=True), RANGE_TIMEOUT_S, wait_for_load=True)
    if result is None or len(result.holes) != len(holes):
        return None
    if doc.version != version or ls.documents.get(uri) is not doc:
        log.info("fillHoles: %s changed while the engine worked; dropping the edit", uri)
        return None
    fills = [HoleFill(h.text, h.passes, h.finish_reason, result.elapsed_ms) for h in result.holes]
    new_text, filled = apply_fills(plan, fills)
    if not filled:
        return None
    return _edit(doc, line_edits(doc.text, new_text, ls.encoding))
