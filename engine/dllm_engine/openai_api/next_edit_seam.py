"""Mercury Edit's next-edit message served by the one next-edit engine request.

`/v1/edit/completions` parses the message (next_edit_format.py) into the document, the
editable region, the cursor and the recent edits as unified diffs; this turns that into
a `NextEditRequest` (the same request the language server sends, next_edit/request.py),
runs `Engine.next_edit` off the event loop, and answers the rewritten region, which is
what Mercury Edit's clients expect back (the region unchanged when nothing is proposed).

The newest diff becomes the request's last edit: its removed and added lines, placed
where the added text stands in the document nearest the cursor (a diff says nothing of
offsets in the current text). Older diffs and a newest one whose text cannot be found
are read only for what they removed, or dropped.
"""

from __future__ import annotations

import asyncio
import threading

from ..next_edit.request import NextEditRequest, RecentEdit
from .next_edit_format import NextEditPrompt


def diff_sides(diff: str) -> tuple[str, str]:
    """(removed, added) text of a unified diff's hunk lines, headers and context left out."""
    removed, added = [], []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@")):
            continue
        if line.startswith("-"):
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
    return "\n".join(removed), "\n".join(added)


def _nearest(document: str, text: str, cursor: int) -> int | None:
    best, at = None, document.find(text)
    while at >= 0:
        if best is None or abs(at - cursor) < abs(best - cursor):
            best = at
        at = document.find(text, at + 1)
    return best


def recent_edits(prompt: NextEditPrompt) -> list[RecentEdit]:
    edits = []
    for i, diff in enumerate(prompt.history):
        removed, added = diff_sides(diff)
        if not removed and not added:
            continue
        newest = i == len(prompt.history) - 1
        at = _nearest(prompt.document, added, prompt.cursor) if added else None
        if at is not None:
            edits.append(RecentEdit(offset=at, removed=removed, inserted=added))
        elif not newest:  # an older edit is read for what it removed only
            edits.append(RecentEdit(offset=0, removed=removed, inserted=""))
    last = edits[-1] if edits else None
    if last is not None and prompt.document[last.offset:last.offset + len(last.inserted)] != last.inserted:
        edits.pop()
    return edits


def next_edit_request(prompt: NextEditPrompt) -> NextEditRequest:
    doc, (start, end) = prompt.document, prompt.region
    first = doc.count("\n", 0, start)
    last = doc.count("\n", 0, max(start, end - 1)) + 1 if end > start else first + 1
    return NextEditRequest(document=doc, edits=recent_edits(prompt), region_start_line=first,
                           region_end_line=min(last, doc.count("\n") + 1), cursor=prompt.cursor)


def region_after(prompt: NextEditPrompt, result) -> str:
    """The editable region with the proposed spans applied (unchanged when there are none)."""
    start, end = prompt.region
    text = prompt.document
    for span in sorted(result.spans, key=lambda s: s.start, reverse=True):
        if start <= span.start <= span.end <= end:
            text = text[:span.start] + span.new + text[span.end:]
            end += len(span.new) - (span.end - span.start)
    return text[start:end]


async def serve_next_edit(request, engine, prompt: NextEditPrompt, body) -> str:
    req = next_edit_request(prompt)
    req.validate()
    cancel = threading.Event()
    try:  # in a worker thread: a client that goes away cancels it there
        result = await asyncio.to_thread(engine.next_edit, req, cancel)
    except asyncio.CancelledError:
        cancel.set()
        raise
    return region_after(prompt, result)
