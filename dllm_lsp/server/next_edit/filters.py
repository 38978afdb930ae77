"""Why a next-edit proposal is not shown: pure checks, each naming its reason.

A proposal is a list of (start, end, new text, confidence) replacements of the
document as it is. Its spans under the confidence threshold are left out first
(`confident`); the rest is dropped when it changes only whitespace, undoes the
user's last edit (puts back what it removed, rewrites what it inserted), adds
parse errors, has a span under the threshold, or was rejected before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .history import Edit

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Replacement:
    start: int
    end: int
    new: str
    confidence: float


def apply(text: str, replacements: list[Replacement]) -> str:
    out, last = [], 0
    for r in sorted(replacements, key=lambda r: r.start):
        out += [text[last:r.start], r.new]
        last = r.end
    out.append(text[last:])
    return "".join(out)


def signature(text: str, replacements: list[Replacement]) -> frozenset[tuple[str, str]]:
    """What a proposal does, independent of where the lines moved: (old text, new text) pairs."""
    return frozenset((text[r.start:r.end], r.new) for r in replacements)


def _squeeze(s: str) -> str:
    return re.sub(r"\s+", "", s)


def confident(replacements: list[Replacement], min_confidence: float) -> list[Replacement]:
    """The spans the model is sure enough of: one doubtful span (a stale use filled with
    another name) must not cost the others, which are often right."""
    return [r for r in replacements if r.confidence >= min_confidence]


def drop_reason(text: str, replacements: list[Replacement], last: Edit | None, before_last: str | None,
                removed_words: set[str], language: Any, min_confidence: float,
                rejected: set[frozenset[tuple[str, str]]]) -> str | None:
    """None if the proposal may be shown, else why not."""
    if not replacements:
        return "no change"
    if all(_squeeze(text[r.start:r.end]) == _squeeze(r.new) for r in replacements):
        return "whitespace only"
    if min(r.confidence for r in replacements) < min_confidence:
        return f"confidence {min(r.confidence for r in replacements):.2f} under {min_confidence:.2f}"
    if signature(text, replacements) in rejected:
        return "rejected before"
    new_text = apply(text, replacements)
    if last is not None:
        lo, hi = last.offset, last.offset + len(last.inserted)
        # A span touching the text just typed edits it (`, unit` then `):` -> `=None):`).
        if any(r.start <= hi and r.end >= lo for r in replacements) or (before_last is not None and new_text == before_last):
            return "undoes the last edit"
        if any(set(WORD.findall(r.new)) & removed_words - set(WORD.findall(text[r.start:r.end]))
               for r in replacements):
            return "puts back a name the last edit removed"
    if language is not None:
        from ...syntax.parse_check import new_error_count

        if new_error_count(text, new_text, language) > 0:
            return "does not parse"
    return None
