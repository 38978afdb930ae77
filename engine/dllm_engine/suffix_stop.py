"""Where a fill starts writing the code after its hole: `Hole.stop_at_suffix`'s rule.

A pretrained base laid out as our infiller was never taught to end a middle: given room, it
writes on past the hole (on HumanEval single-line holes of variable length the default model
ran 56 tokens a fill where the real line has 12). Where it wrote the hole's line right, what it
writes next is the code that follows the hole, which the suffix already holds. So after each
pass the engine looks for the suffix's head (its text up to the end of its first line that
holds something) in the fill's committed text; once it is there the fill ends, cut before it,
and the passes after it are never run. Offline over the default model's 207 variable-length
fills of HumanEval single-line `tasks[::5]`: 46 of them held the head, and cut there pass@1
went from 5 to 28 tasks (benchmarks/RESULTS.md, twenty-third session).

A head of a few characters or punctuation alone (`}`, `)`, `end`) could stand in the real fill
too: then the head runs on to the end of the suffix's next line that holds something, so two
lines must come again before the fill is cut. The search is on exact text: the head carries
the suffix's own leading line breaks and indentation (an indented head counts only at a line's
start), so a line the fill writes at another indentation, or a statement that only starts like
the suffix's, is no echo.
"""

from __future__ import annotations

# A first line shorter than this (stripped), or without a letter or digit, is too common to
# mark the end of a fill alone.
MIN_HEAD_CHARS = 4


def suffix_head(suffix: str) -> str | None:
    """The suffix up to the end of its first line that holds something (its line break
    included), or of its second when the first is short or punctuation alone; None for a
    suffix of blanks alone (nothing the fill could repeat)."""
    start, lines = 0, 0
    while start < len(suffix):
        nl = suffix.find("\n", start)
        end = len(suffix) if nl < 0 else nl + 1
        line = suffix[start:end].strip()
        if line:
            lines += 1
            if lines == 2 or (len(line) >= MIN_HEAD_CHARS and any(c.isalnum() for c in line)):
                return suffix[:end]
        start = end
    return suffix if lines else None


def suffix_cut(text: str, head: str | None, prefix: str = "") -> int:
    """The offset in the fill's text where it starts repeating `head`, or -1. A head that
    starts with indentation counts only where a line starts (the fill's own start is one when
    the prefix ends with a line break), not inside a deeper indentation."""
    if not head:
        return -1
    line_start = not prefix or prefix.endswith("\n")
    at = text.find(head)
    while at >= 0:
        if head[0] not in " \t" or (text[at - 1] == "\n" if at else line_start):
            return at
        at = text.find(head, at + 1)
    return -1
