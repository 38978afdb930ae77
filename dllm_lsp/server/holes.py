"""Placeholders that `dllm.fillHoles` fills: bodies left as `pass`, `...`, `todo!()`, or a marker.

A placeholder counts only where it is a whole body line, right under a line
that opens a block (so a `pass` inside a real body, or `...` as an argument,
is left alone), except for the configurable marker, which is a hole anywhere
on a line of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BODY_PLACEHOLDERS = {
    "pass", "...", "todo!()", "unimplemented!()", "todo!();", "unimplemented!();",
    "throw new UnsupportedOperationException();", 'throw new Error("not implemented");',
}
_OPENERS = (":", "{", "=>")
_LINE = re.compile(r"^[ \t]*(\S.*?)[ \t]*$")


@dataclass(frozen=True)
class Placeholder:
    start: int  # str offset of the placeholder text (after its indentation)
    end: int  # end of the placeholder text (before the line break)
    text: str


def find_placeholders(text: str, marker: str) -> list[Placeholder]:
    found: list[Placeholder] = []
    previous = ""  # the last non-blank line
    offset = 0
    for line in text.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        m = _LINE.match(content)
        if m is not None:
            body = m.group(1)
            is_marker = body == marker or body in (f"# {marker}", f"// {marker}", f"/* {marker} */")
            if is_marker or (body in _BODY_PLACEHOLDERS and previous.rstrip().endswith(_OPENERS)):
                found.append(Placeholder(offset + m.start(1), offset + m.end(1), body))
            previous = content
        offset += len(line)
    return found
