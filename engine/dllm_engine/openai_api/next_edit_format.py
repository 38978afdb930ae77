"""Mercury Edit's "next edit" message, read into what a next-edit engine request needs.

The format (Inception's, as Continue's Mercury provider writes it: core/nextEdit/
templating/mercuryCoderNextEdit.ts and constants.ts) is one user message of tagged blocks:

    <|recently_viewed_code_snippets|>
    <|recently_viewed_code_snippet|>
    code_snippet_file_path: a.py
    ...
    <|/recently_viewed_code_snippet|>
    <|/recently_viewed_code_snippets|>

    <|current_file_content|>
    current_file_path: b.py
    ...lines...
    <|code_to_edit|>
    ...the editable region, holding <|cursor|>...
    <|/code_to_edit|>
    ...lines...
    <|/current_file_content|>

    <|edit_diff_history|>
    ...unified diffs, oldest first...
    <|/edit_diff_history|>

`parse_next_edit` turns it into the document as the editor has it (tags and cursor
token removed), the editable region and the cursor as offsets into that document,
the diffs and the snippets. The next-edit engine request (issue 14) takes it from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..protocol import ProtocolError

CURSOR = "<|cursor|>"
REGION_OPEN, REGION_CLOSE = "<|code_to_edit|>", "<|/code_to_edit|>"


@dataclass(frozen=True)
class NextEditPrompt:
    document: str
    region: tuple[int, int]  # [start, end) of the editable region in `document`
    cursor: int  # offset in `document`
    path: str | None = None
    history: list[str] = field(default_factory=list)  # unified diffs, oldest first
    snippets: list[tuple[str | None, str]] = field(default_factory=list)  # (path, text), oldest first

    @property
    def editable(self) -> str:
        return self.document[self.region[0]:self.region[1]]


def is_next_edit(content: str) -> bool:
    return REGION_OPEN in content


def _block(content: str, name: str) -> str | None:
    m = re.search(rf"<\|{name}\|>\n?(.*?)\n?<\|/{name}\|>", content, re.DOTALL)
    return m.group(1) if m else None


def _path_line(text: str, key: str) -> tuple[str | None, str]:
    first, _, rest = text.partition("\n")
    if first.startswith(key + ":"):
        return first[len(key) + 1:].strip() or None, rest
    return None, text


def parse_next_edit(content: str) -> NextEditPrompt:
    current = _block(content, "current_file_content")
    if current is None:
        raise ProtocolError("messages: a next-edit message needs a <|current_file_content|> block")
    path, text = _path_line(current, "current_file_path")
    if text.count(REGION_OPEN) != 1 or text.count(REGION_CLOSE) != 1 or text.index(REGION_OPEN) > text.index(REGION_CLOSE):
        raise ProtocolError("messages: the current file needs exactly one <|code_to_edit|> ... <|/code_to_edit|>")
    if text.count(CURSOR) > 1:
        raise ProtocolError("messages: at most one <|cursor|> in the current file")
    # The tags sit on lines of their own: their line breaks go with them.
    before, _, rest = text.partition(REGION_OPEN)
    region, _, after = rest.partition(REGION_CLOSE)
    region = region[1:] if region.startswith("\n") else region
    region = region[:-1] if region.endswith("\n") else region
    # The line break after the closing tag now ends the region's last line; an empty region has none.
    if after.startswith("\n") and not region:
        after = after[1:]
    joined = before + region + after
    start, end = len(before), len(before) + len(region)
    if CURSOR in joined:
        cursor = joined.index(CURSOR)
        if not (start <= cursor <= end - len(CURSOR)):
            raise ProtocolError("messages: <|cursor|> must be inside <|code_to_edit|>")
        joined = joined.replace(CURSOR, "")
        end -= len(CURSOR)
    else:
        cursor = end
    history_text = _block(content, "edit_diff_history") or ""
    history = [d for d in re.split(r"(?m)^(?=--- )", history_text) if d.strip()]
    snippets = []
    for m in re.finditer(r"<\|recently_viewed_code_snippet\|>\n?(.*?)\n?<\|/recently_viewed_code_snippet\|>",
                         content, re.DOTALL):
        snippets.append(_path_line(m.group(1), "code_snippet_file_path"))
    return NextEditPrompt(document=joined, region=(start, end), cursor=cursor, path=path, history=history,
                          snippets=snippets)
