"""Where the cursor lands when the user accepts a suggestion and presses Enter.

The server prefetches the suggestion for that place while the user types through (or
accepts) the current one, so the next line's ghost text is in the suggestion cache when the
editor asks for it. That only pays if the guessed document is the one the editor will have:
the suggestion inserted (replacing the closers it consumes), a line break, and the new
line's indentation as an editor's auto-indent makes it: the accepted line's own, one unit
deeper after a line that opens a block (`:` / `{`), one unit shallower after a Python line
that ends its block (`return`, `pass`, `raise`, `break`, `continue`), as VS Code's Python
on-enter rules and Neovim's tree-sitter indentation do. A wrong guess costs one fill that no
request reads (the cache matches on the exact text), never a wrong suggestion.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .indentation import indent_unit, leading
from .languages import LanguageSpec

_UNIT_WINDOW = 8192  # characters before the cursor's line that tell the indentation step

# A Python statement after which the block ends: the next line goes one level out.
_ENDS_BLOCK = re.compile(r"^(return|pass|raise|break|continue)\b")


class Edit(NamedTuple):
    """text[start:end] becomes `text`; the cursor ends at `cursor` (an offset in the new text)."""

    start: int
    end: int
    text: str
    cursor: int


def after_enter(text: str, offset: int, inserted: str, replace_end: int,
                language: LanguageSpec | None) -> Edit | None:
    """The edit that `inserted` replacing text[offset:replace_end], then Enter at its end,
    makes; None when the accepted text does not end its line (text still follows it on the
    line: Enter would split the line, not open a new one)."""
    line_end = text.find("\n", replace_end)
    rest_of_line = text[replace_end:line_end if line_end >= 0 else len(text)]
    if rest_of_line not in ("", "\r") or not inserted.strip():
        return None
    line_start = text.rfind("\n", 0, offset) + 1
    accepted_line = (text[line_start:offset] + inserted).rsplit("\n", 1)[-1]
    # The indentation step from the text near the cursor: this runs on every keystroke that
    # types through a suggestion, so it must not scan a large document whole.
    indent = _next_indent(accepted_line, text[max(0, line_start - _UNIT_WINDOW):offset], language)
    eol = "\r\n" if rest_of_line else "\n"  # the editor breaks the line as the document does
    typed = inserted + eol + indent
    return Edit(offset, replace_end, typed, offset + len(typed))


def _next_indent(line: str, nearby: str, language: LanguageSpec | None) -> str:
    """The new line's indentation after `line`; `nearby`: text before it, for the step."""
    lead = leading(line)
    body = line.strip()
    opener = language.block_opener if language is not None else None
    if body.endswith(opener) if opener else body.endswith((":", "{")):
        return lead + indent_unit(nearby)
    indented = language is None or language.indent_style == "indent"
    if indented and language is not None and language.name == "python" and _ENDS_BLOCK.match(body):
        unit = indent_unit(nearby)
        return lead[:-len(unit)] if lead.endswith(unit) else lead
    return lead
