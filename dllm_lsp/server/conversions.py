"""LSP positions <-> Python str offsets, in the negotiated position encoding.

An LSP `Position.character` counts UTF-16 code units by default, UTF-8 bytes or
code points when the client negotiated `positionEncoding` "utf-8" / "utf-32".
A Python str index counts code points. Everything inside the server works on
str offsets; positions are converted only at the protocol edge, here.

Rules (LSP 3.17): a character past the end of its line means the end of the
line; a position inside a surrogate pair or a multi-byte UTF-8 sequence rounds
down to the start of that character. A line past the end of the document is
an error (the client and server disagree about the text), except the line just
after a final newline.
"""

from __future__ import annotations

import bisect
import re
from typing import Literal

from lsprotocol import types

Encoding = Literal["utf-16", "utf-8", "utf-32"]


class InvalidPosition(ValueError):
    """A position that does not exist in the document."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """Lone UTF-16 surrogates (legal in JSON and LSP text, half an emoji) as U+FFFD.

    JSON decoding joins every proper pair, so any surrogate left in a str is lone;
    no tokenizer or UTF-8 encoder takes one. U+FFFD is one UTF-16 code unit, one
    code point and three UTF-8 bytes, as the surrogate was: positions are unchanged.
    """
    if text.isascii():  # the common case, in C speed
        return text
    return _SURROGATE.sub("\ufffd", text)


def normalize_encoding(kind: str | None) -> Encoding:
    if kind in ("utf-8", "utf-32"):
        return kind  # type: ignore[return-value]
    return "utf-16"


def line_starts(text: str) -> list[int]:
    """Str offsets where each line begins. LSP lines end at \\n, \\r\\n or \\r."""
    starts = [0]
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            starts.append(i + 1)
        elif c == "\r":
            if i + 1 < n and text[i + 1] == "\n":
                i += 1
            starts.append(i + 1)
        i += 1
    return starts


def _fast_line_starts(text: str) -> list[int]:
    # The common case (no bare \r) in C speed: str.find in a loop is ~50x the Python loop.
    if "\r" in text:
        return line_starts(text)
    starts, i = [0], text.find("\n")
    while i != -1:
        starts.append(i + 1)
        i = text.find("\n", i + 1)
    return starts


class LineIndex:
    """Line starts of one text, for O(log n) conversions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = _fast_line_starts(text)

    def line_end(self, line: int) -> int:
        """Offset of the end of `line`'s content (before its line break)."""
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        while end > self.starts[line] and self.text[end - 1] in "\r\n":
            end -= 1
        return end

    def offset(self, position: types.Position, encoding: Encoding = "utf-16") -> int:
        line, character = position.line, position.character
        if line < 0 or character < 0:
            raise InvalidPosition(f"negative position {line}:{character}")
        if line >= len(self.starts):
            raise InvalidPosition(f"line {line} is past the end of the document ({len(self.starts)} lines)")
        start, end = self.starts[line], self.line_end(line)
        return start + units_to_chars(self.text[start:end], character, encoding)

    def position(self, offset: int, encoding: Encoding = "utf-16") -> types.Position:
        if not 0 <= offset <= len(self.text):
            raise InvalidPosition(f"offset {offset} outside the document (length {len(self.text)})")
        line = bisect.bisect_right(self.starts, offset) - 1
        return types.Position(line=line, character=chars_to_units(self.text[self.starts[line]:offset], encoding))

    def range(self, start: int, end: int, encoding: Encoding = "utf-16") -> types.Range:
        return types.Range(start=self.position(start, encoding), end=self.position(end, encoding))

    def offsets(self, rng: types.Range, encoding: Encoding = "utf-16") -> tuple[int, int]:
        start, end = self.offset(rng.start, encoding), self.offset(rng.end, encoding)
        if end < start:
            raise InvalidPosition(f"range end {rng.end.line}:{rng.end.character} is before its start")
        return start, end


def char_units(c: str, encoding: Encoding) -> int:
    if encoding == "utf-32":
        return 1
    cp = ord(c)
    if encoding == "utf-16":
        return 2 if cp > 0xFFFF else 1
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def chars_to_units(segment: str, encoding: Encoding) -> int:
    """Length of `segment` in the encoding's units."""
    if encoding == "utf-32" or segment.isascii():
        return len(segment)
    if encoding == "utf-8":
        return len(segment.encode("utf-8", "surrogatepass"))
    return len(segment) + sum(1 for c in segment if ord(c) > 0xFFFF)


def units_to_chars(line: str, units: int, encoding: Encoding) -> int:
    """How many characters of `line` fit in `units` (clamped to the line; rounds down mid-character)."""
    if encoding == "utf-32" or line.isascii():
        return min(units, len(line))
    used = 0
    for i, c in enumerate(line):
        used += char_units(c, encoding)
        if used > units:
            return i
    return len(line)


def utf8_offset(text: str, offset: int) -> int:
    """Byte offset in the UTF-8 encoding of `text` of str offset `offset` (for tree-sitter)."""
    head = text[:offset]
    return len(head) if head.isascii() else len(head.encode("utf-8", "surrogatepass"))
