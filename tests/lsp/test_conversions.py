"""Positions <-> offsets in UTF-16, UTF-8 and UTF-32, checked against Python's own encoders."""

from __future__ import annotations

import random

import pytest
from lsprotocol.types import Position

from dllm_lsp.server.conversions import InvalidPosition, LineIndex, line_starts, utf8_offset

ALPHABET = ["a", "b", " ", "\t", "é", "中", "文", "😀", "𝔸", "\n", "\r\n", "\r"]


def units(s: str, encoding: str) -> int:
    if encoding == "utf-32":
        return len(s)
    return len(s.encode("utf-16-le" if encoding == "utf-16" else "utf-8")) // (2 if encoding == "utf-16" else 1)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_round_trip_on_random_text(encoding):
    rng = random.Random(encoding)
    for _ in range(50):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 60)))
        index = LineIndex(text)
        for offset in range(len(text) + 1):
            if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
                continue  # inside a \r\n break: no position names it
            position = index.position(offset, encoding)
            line_start = index.starts[position.line]
            assert position.character == units(text[line_start:offset], encoding)
            assert index.offset(position, encoding) == offset


def test_line_breaks_follow_lsp():
    assert line_starts("a\nb\r\nc\rd") == [0, 2, 5, 7]
    assert LineIndex("a\r\nb").starts == [0, 3]


def test_past_end_of_line_clamps_and_mid_character_rounds_down():
    index = LineIndex("x😀y\nz")
    assert index.offset(Position(line=0, character=99)) == 3  # end of line 0, before its \n
    assert index.offset(Position(line=0, character=2)) == 1  # inside the surrogate pair: before the emoji
    assert index.offset(Position(line=0, character=3), "utf-8") == 1  # inside the 4-byte sequence
    assert index.offset(Position(line=1, character=1)) == 5


def test_line_past_the_end_is_invalid():
    index = LineIndex("one\ntwo\n")
    assert index.offset(Position(line=2, character=0)) == 8  # the empty line after the final newline
    with pytest.raises(InvalidPosition):
        index.offset(Position(line=3, character=0))
    with pytest.raises(InvalidPosition):
        index.position(99)


def test_utf8_offset():
    assert utf8_offset("a😀b", 2) == 5
    assert utf8_offset("abc", 2) == 2
