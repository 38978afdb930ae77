"""The user's recent edits per document, as (offset, removed, inserted) diffs, newest last.

Each didChange is one diff between the text before and after it (a client may send
several content changes per notification; the diff covers them all). Keystrokes that
continue the previous edit (typing on through a word, backspacing over it) are folded
into it, so renaming `w` to `width` in five keystrokes reads as one edit.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ...syntax.document_tree import _longest

MAX_EDITS = 8


@dataclass(frozen=True)
class Edit:
    offset: int  # where `inserted` starts in the text after the edit
    removed: str
    inserted: str


def diff(old: str, new: str) -> Edit | None:
    """The one span that differs between `old` and `new`, or None when they are equal
    (common prefix and suffix by bisection, as the document tree finds its edit)."""
    if old == new:
        return None
    limit = min(len(old), len(new))
    start = _longest(lambda n: old[:n] == new[:n], limit)
    tail = _longest(lambda n: old[len(old) - n:] == new[len(new) - n:], limit - start)
    return Edit(start, old[start:len(old) - tail], new[start:len(new) - tail])


def coalesce(prev: Edit, new: Edit) -> Edit | None:
    """`prev` and `new` as one edit when `new` lies within or at the ends of what `prev` inserted."""
    lo, hi = prev.offset, prev.offset + len(prev.inserted)
    if not (lo <= new.offset and new.offset + len(new.removed) <= hi):
        return None
    at = new.offset - lo
    inserted = prev.inserted[:at] + new.inserted + prev.inserted[at + len(new.removed):]
    return Edit(prev.offset, prev.removed, inserted)


class EditHistory:
    def __init__(self) -> None:
        self._edits: dict[str, deque[Edit]] = {}
        self._before: dict[str, str] = {}  # the text before the newest edit (to spot an undo)

    def record(self, uri: str, old: str, new: str) -> Edit | None:
        edit = diff(old, new)
        if edit is None:
            return self.last(uri)
        edits = self._edits.setdefault(uri, deque(maxlen=MAX_EDITS))
        merged = coalesce(edits[-1], edit) if edits else None
        if merged is not None:
            edits[-1] = merged
        else:
            edits.append(edit)
            self._before[uri] = old
        if merged is not None and merged.removed == merged.inserted:  # typed and taken back: no edit
            edits.pop()
            self._before.pop(uri, None)
            return self.last(uri)
        return edits[-1]

    def recent(self, uri: str) -> list[Edit]:
        return list(self._edits.get(uri, ()))

    def last(self, uri: str) -> Edit | None:
        edits = self._edits.get(uri)
        return edits[-1] if edits else None

    def text_before_last(self, uri: str) -> str | None:
        return self._before.get(uri)

    def forget(self, uri: str) -> None:
        self._edits.pop(uri, None)
        self._before.pop(uri, None)
