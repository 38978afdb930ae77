"""Where a multi-line fill has shown enough lines: `Hole.max_lines`' rule, on the fill's text.

A small base's multi-line guess is right, when it is right at all, in its first lines: on 60
empty function bodies of the standard library (the default model, 128 tokens), 24 of the 25
written lines that stand in the real body were among each fill's first four lines, 1 of the
103 lines after them; 11 of the 60 fills ran to their 128 tokens (benchmarks/RESULTS.md,
eighteenth session). The language server shows at most its `multilineMaxLines` lines, so the
engine ends the fill there after each pass: the passes that would write the lines no one sees
are never run.

The rule (the server's, restated: the syntax layer imports no engine; tests/engine/test_line_cap.py
checks the two agree): after the fill's `max_lines`-th line that holds something, at the first
line break where the text before it closes every bracket it opened outside triple-quoted
strings. A docstring still open there is cut too, once it holds some text, and the server
closes it (its quotes on a line of their own): left whole, a docstring that ran on (9 of 60
empty bodies' fills never closed theirs in 128 tokens) cost seconds and was then dropped,
since it did not parse.
"""

from __future__ import annotations

_OPEN, _CLOSE = "([{", ")]}"
_TRIPLE = ('"""', "'''")


def line_cap_cut(text: str, max_lines: int) -> int:
    """The offset of the line break that ends `text` after `max_lines` lines holding something
    (the first such break where every bracket is closed, and any triple-quoted string open there
    already holds some text), or -1 when there is none (yet: only complete lines count, the last
    one may still grow)."""
    depth, quote, said, lines, line_has, i = 0, "", False, 0, False, 0
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            lines += line_has
            if lines >= max_lines and depth <= 0 and (not quote or said):
                return i
            line_has = False
        elif text.startswith(_TRIPLE, i) and (not quote or text.startswith(quote, i)):
            quote, said = ("" if quote else text[i:i + 3]), False
            line_has = True
            i += 3
            continue
        elif not ch.isspace():
            line_has = True
            if quote:
                said = True
            else:  # brackets in a docstring's prose are not code
                depth += ch in _OPEN
                depth -= ch in _CLOSE
        i += 1
    return -1
