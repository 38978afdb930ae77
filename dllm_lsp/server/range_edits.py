"""Range edits: regenerate a selection, fill every placeholder. Both return a WorkspaceEdit.

The engine fills a re-masked span with both sides as context. An edit that
would add parse errors to the document is dropped (never corrupt the user's
file); the reason is logged and the caller hears "no edit".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dllm_engine.protocol import Hole
from lsprotocol import types

from ..syntax.parse_check import new_error_count
from .holes import find_placeholders
from .infill import plan_range, request_for

if TYPE_CHECKING:
    from .documents import Document
    from .server import DllmServer

log = logging.getLogger(__name__)

RANGE_TIMEOUT_S = 60.0
MAX_HOLES = 64


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
    result = await ls.engine.infill(request_for([hole], ls.options, "interactive"), RANGE_TIMEOUT_S, wait_for_load=True)
    if result is None or not result.holes:
        return None
    if doc.version != version or ls.documents.get(uri) is not doc:
        log.info("regenerate: %s changed while the engine worked; dropping the edit", uri)
        return None
    new = result.holes[0].text
    if not _keeps_parsing(doc, [(start, end, new)]):
        log.info("regenerate: the fill for %s adds parse errors; dropping it: %r", uri, new[:120])
        return None
    return _edit(doc, [types.TextEdit(range=rng, new_text=new)])


async def fill_holes(ls: "DllmServer", uri: str) -> types.WorkspaceEdit | None:
    doc = ls.documents.get(uri)
    if doc is None:
        log.warning("fillHoles: document not open: %s", uri)
        return None
    placeholders = find_placeholders(doc.text, ls.options.fill_marker)[:MAX_HOLES]
    if not placeholders:
        return None
    version = doc.version
    holes: list[Hole] = [plan_range(doc, p.start, p.end, ls.options)[1] for p in placeholders]
    result = await ls.engine.infill(request_for(holes, ls.options, "interactive"), RANGE_TIMEOUT_S, wait_for_load=True)
    if result is None or len(result.holes) != len(placeholders):
        return None
    if doc.version != version or ls.documents.get(uri) is not doc:
        log.info("fillHoles: %s changed while the engine worked; dropping the edit", uri)
        return None
    replacements = []
    for p, filled in zip(placeholders, result.holes):
        text = filled.text.strip("\n")
        if not text.strip():
            continue
        # Each fill must keep the document parsing on its own: one bad hole does not sink the rest.
        if _keeps_parsing(doc, [(p.start, p.end, text)]):
            replacements.append((p.start, p.end, text))
        else:
            log.info("fillHoles: dropping a fill that adds parse errors: %r", text[:120])
    if not replacements:
        return None
    edits = [types.TextEdit(range=doc.index.range(s, e, ls.encoding), new_text=t) for s, e, t in replacements]
    return _edit(doc, edits)
