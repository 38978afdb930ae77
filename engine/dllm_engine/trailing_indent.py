"""A fill's blanks after its last line break, where the code after the hole brings its own.

A fill that ends on a line break followed by blanks has begun the next line's indentation. Where
the suffix starts at that line with indentation of its own (or ends the line at once), those
blanks are not the fill's: inserted, they push the suffix's first line deeper than it is written
(an IndentationError in Python) or leave blanks on an empty line. A base whose tokenizer merges
a line break with the following indentation writes them whenever its fill ends at a line's end
and it is given a token more: SmolLM2's `"\\n   "` is one token, so a fill of a fixed length (the
evaluation's oracle length, a refactor's range) often ends with it. Where the suffix starts with
text, the blanks stay: they are the model's choice of that text's indentation.
"""

from __future__ import annotations

BLANKS = " \t"


def trailing_indent_cut(text: str, suffix: str) -> int:
    """Where to cut `text` (the fill) so its blanks after its last line break go, or -1 to keep
    it whole: only when the fill ends in blanks after a line break and `suffix` starts with a
    blank or a line break."""
    nl = text.rfind("\n")
    if nl < 0 or nl == len(text) - 1 or text[nl + 1:].strip(BLANKS):
        return -1
    if not suffix or suffix[0] not in BLANKS + "\r\n":
        return -1
    return nl + 1
