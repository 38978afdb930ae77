"""A document's text plus its tree-sitter tree, updated incrementally on edits."""

from __future__ import annotations

import tree_sitter

from dllm_lsp.syntax.languages import LanguageSpec, parse

Point = tuple[int, int]  # (row, byte column), as tree-sitter counts


def byte_offset(text: str, offset: int) -> int:
    """UTF-8 byte offset of the str index ``offset``."""
    return len(text[:offset].encode("utf-8", "surrogatepass"))


def point_at(text: str, offset: int) -> Point:
    """tree-sitter point (row, UTF-8 byte column) of the str index ``offset``."""
    row = text.count("\n", 0, offset)
    line_start = text.rfind("\n", 0, offset) + 1
    return row, len(text[line_start:offset].encode("utf-8", "surrogatepass"))


class DocumentTree:
    """Text and tree of one document; ``tree`` is None for unknown languages."""

    def __init__(self, text: str, language: LanguageSpec | None):
        self.language = language
        self.text = text
        self.tree: tree_sitter.Tree | None = parse(text, language) if language else None

    def apply_edit(
        self,
        start_byte: int,
        old_end_byte: int,
        new_end_byte: int,
        start_point: Point,
        old_end_point: Point,
        new_end_point: Point,
        new_text: str,
    ) -> None:
        """Record one edit, described as tree-sitter wants it, and reparse incrementally.

        ``new_text`` is the whole document after the edit (what the server's
        document store holds once it applied the change).
        """
        self.text = new_text
        if self.tree is None or self.language is None:
            return
        # Edit a copy (tree-sitter's copies are shallow): a tree handed out before this edit, a
        # completion's plan held across the engine's fill, must still describe its own text.
        edited = self.tree.copy()
        edited.edit(
            start_byte=start_byte,
            old_end_byte=old_end_byte,
            new_end_byte=new_end_byte,
            start_point=tuple(start_point),
            old_end_point=tuple(old_end_point),
            new_end_point=tuple(new_end_point),
        )
        self.tree = parse(new_text, self.language, edited)

    def replace(self, start: int, end: int, inserted: str) -> None:
        """Replace ``text[start:end]`` (str indices) by ``inserted``."""
        old = self.text
        new_text = old[:start] + inserted + old[end:]
        start_byte = byte_offset(old, start)
        old_end_byte = start_byte + len(old[start:end].encode("utf-8", "surrogatepass"))
        new_end_byte = start_byte + len(inserted.encode("utf-8", "surrogatepass"))
        self.apply_edit(
            start_byte,
            old_end_byte,
            new_end_byte,
            point_at(old, start),
            point_at(old, end),
            point_at(new_text, start + len(inserted)),
            new_text,
        )

    def edited(self, start: int, end: int, inserted: str) -> "DocumentTree":
        """A copy with ``text[start:end]`` replaced by ``inserted``, this one untouched: the
        document as it would be after an edit the user has not made yet (a prefetch), at the
        cost of an incremental reparse rather than a fresh one."""
        copy = DocumentTree.__new__(DocumentTree)
        copy.language, copy.text = self.language, self.text
        copy.tree = self.tree  # replace() edits a copy of it: this one stays as it is
        copy.replace(start, end, inserted)
        return copy

    def update(self, new_text: str) -> None:
        """Bring the tree up to ``new_text`` as one edit spanning what changed.

        For servers that only keep the full text: the changed span is found by
        the common prefix and suffix, so a keystroke is still an O(1)-sized edit.
        """
        old = self.text
        if new_text == old:
            return
        limit = min(len(old), len(new_text))
        start = _longest(lambda n: old[:n] == new_text[:n], limit)
        tail = _longest(lambda n: old[len(old) - n :] == new_text[len(new_text) - n :], limit - start)
        self.replace(start, len(old) - tail, new_text[start : len(new_text) - tail])


def _longest(holds, limit: int) -> int:
    """Largest n <= limit with holds(n), for a property that holds up to some n and not beyond.

    Binary search over slice comparisons: C-speed, unlike a per-character loop.
    """
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
