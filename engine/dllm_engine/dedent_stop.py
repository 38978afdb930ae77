"""Where a multi-line fill leaves its block: `Hole.stop_indent`'s rule, on the fill's text.

The language server cuts a multi-line completion in an indented language before its first
later line that is indented less than the block it started in (shaping's stop_at_dedent).
Left to run, a pretrained base goes on past the block to max_tokens: on 12 multi-line holes
of the standard library every fill ran to its 64 tokens, of which 109 of 768 survived the cut
(benchmarks/RESULTS.md, thirteenth session). So the engine applies the same rule after each
pass and ends the fill as soon as a committed line leaves the block: the passes after it
are never run.
"""

from __future__ import annotations


def dedent_cut(text: str, indent: int) -> int:
    """The offset of the line break before the first line after the first whose leading
    blanks are fewer than `indent` and that holds something else; -1 when there is none
    yet (a line of blanks alone is undecided: its text may still come)."""
    start = text.find("\n")
    while start >= 0:
        end = text.find("\n", start + 1)
        line = text[start + 1:end if end >= 0 else len(text)]
        body = line.lstrip(" \t")
        if body and len(line) - len(body) < indent:
            return start
        start = end
    return -1
