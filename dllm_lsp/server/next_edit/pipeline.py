"""From a document and its recent edits to an engine request, and from the answer to replacements.

Pure functions shared by the server (`feature.py`) and the benchmark
(`benchmarks/bench_next_edit.py`), so what is measured is what is served.
"""

from __future__ import annotations

from typing import Any

from .filters import Replacement
from .history import Edit
from .region import editable_region

# The engine sees this much of the document around the region (it reads at most
# 2400 characters before and 1200 after each span): a huge file is never sent whole.
CONTEXT_BEFORE, CONTEXT_AFTER = 4000, 2000


def plan_request(text: str, tree: Any, spec: Any, recent: list[Edit], cursor: int | None, max_lines: int,
                 params: Any, **extra: Any):
    """(request, offset of its window in `text`, newest edit or None, names it replaced), or None
    when there is neither an edit nor a cursor to centre the region on."""
    from dllm_engine.next_edit import NextEditRequest
    from dllm_engine.next_edit.spans import adds_argument, enclosing_call_name, new_words, replaced_words

    edits = [e for e in recent if e.offset + len(e.inserted) <= len(text)]
    last = edits[-1] if edits and text[edits[-1].offset:].startswith(edits[-1].inserted) else None
    if last is None:
        edits = []
    if last is None and cursor is None:
        return None
    at, end = (last.offset, last.offset + len(last.inserted)) if last else (cursor, cursor)
    removed = replaced_words(text, _engine_edit(last)) if last else set()
    # An argument added inside `name(...)`: the region reaches for the other calls of `name`.
    called = enclosing_call_name(text, last.offset) if last and adds_argument(_engine_edit(last)) else None
    written = new_words(text, _engine_edit(last)) if last else set()
    region = editable_region(text, tree, spec, at, end, max_lines, removed, {called} if called else set(), written)
    request, base = _windowed_request(NextEditRequest, text, edits, region, cursor if cursor is not None else end,
                                      params=params, **extra)
    return request, base, last, removed


def replacements_of(result: Any, base: int) -> list[Replacement]:
    return [Replacement(base + s.start, base + s.end, s.new, s.confidence) for s in result.spans]


def _engine_edit(edit: Edit):
    from dllm_engine.next_edit import RecentEdit

    return RecentEdit(edit.offset, edit.removed, edit.inserted)


def _windowed_request(request_cls, text: str, edits: list[Edit], region, cursor: int, **extra: Any):
    """The request over a slice of the document around the region (offsets shifted), and
    the slice's start: the engine reads only a few thousand characters around each span."""
    from dllm_engine.next_edit.request import CallerSpan, RecentEdit

    lines = text.splitlines(keepends=True) or [""]
    region_lo = sum(len(line) for line in lines[:region.start_line])
    region_hi = region_lo + sum(len(line) for line in lines[region.start_line:region.end_line])
    base = text.rfind("\n", 0, max(0, region_lo - CONTEXT_BEFORE)) + 1 if region_lo > CONTEXT_BEFORE else 0
    stop = text.find("\n", region_hi + CONTEXT_AFTER)
    stop = len(text) if stop < 0 else stop + 1
    if edits:  # a region away from the edit (its uses out of the edit's reach): the edit is still the request's
        newest = edits[-1]
        base = min(base, text.rfind("\n", 0, newest.offset) + 1)
        end = text.find("\n", newest.offset + len(newest.inserted))
        stop = max(stop, len(text) if end < 0 else end + 1)
    window = text[base:stop]
    first_line = text.count("\n", 0, base)
    kept = [RecentEdit(e.offset - base, e.removed, e.inserted) for e in edits
            if base <= e.offset and e.offset + len(e.inserted) <= stop]
    if edits and (not kept or kept[-1].offset != edits[-1].offset - base):
        kept = []  # the newest edit must be the request's newest
    n_lines = window.count("\n") + 1
    request = request_cls(
        document=window, edits=kept,
        region_start_line=region.start_line - first_line,
        region_end_line=min(n_lines, region.end_line - first_line),
        cursor=min(max(cursor - base, 0), len(window)),
        spans=[CallerSpan(s - base, e - base) for s, e in region.uses + region.arguments
               if base <= s and e <= stop and e > s][:32],
        spans_are_uses=region.parsed, **extra,
    )
    return request, base
