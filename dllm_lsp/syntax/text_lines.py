"""Line helpers over a whole document that only look at the lines they need."""

from __future__ import annotations


def is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def line_bounds(text: str, offset: int) -> tuple[int, int]:
    """(start, end) of the line holding ``offset``; ``end`` is at its newline."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, (len(text) if end < 0 else end)


def previous_nonblank_line(text: str, line_start: int) -> str:
    """The last non-blank line ending before ``line_start`` ("" if none)."""
    end = line_start - 1
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        if text[start:end].strip():
            return text[start:end].rstrip("\r")
        end = start - 1
    return ""


def next_nonblank_line(text: str, line_end: int) -> str | None:
    """The first non-blank line starting after ``line_end`` (a newline index), or None."""
    start = line_end + 1
    while start <= len(text) and line_end < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return text[start:end].rstrip("\r")
        if end >= len(text):
            return None
        start = end + 1
    return None
