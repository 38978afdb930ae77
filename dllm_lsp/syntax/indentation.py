"""Indentation facts about a document, and re-indenting a completion to match it."""

from __future__ import annotations

from collections import Counter


def leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_unit(text: str) -> str:
    """The document's indentation step: a tab, or the most common space step (default 4)."""
    return detected_indent_unit(text) or "    "


def detected_indent_unit(text: str) -> str | None:
    """The document's indentation step, or None when no line is indented."""
    tabs = spaces = 0
    steps: Counter[int] = Counter()
    prev = 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        lead = leading(line)
        if lead.startswith("\t"):
            tabs += 1
        elif lead:
            spaces += 1
        width = len(lead.expandtabs(4))
        if width > prev:
            steps[width - prev] += 1
        prev = width
    if tabs > spaces:
        return "\t"
    common = [step for step, _ in steps.most_common(3) if step in (2, 3, 4, 8)]
    return " " * common[0] if common else None


def _completion_step(lines: list[str]) -> int:
    """Smallest positive indentation step among the completion's lines (spaces)."""
    widths = sorted({len(leading(ln)) for ln in lines if ln.strip()})
    steps = [b - a for a, b in zip(widths, widths[1:]) if b > a]
    return min(steps) if steps else (widths[0] if widths and widths[0] else 4)


def convert_indentation(completion: str, unit: str) -> str:
    """Rewrite leading tabs/spaces of every line to the document's style."""
    lines = completion.split("\n")
    if unit == "\t":
        if not any(leading(ln).startswith(" ") for ln in lines[1:]):
            return completion
        step = _completion_step(lines[1:])
        out = [lines[0]]
        for ln in lines[1:]:
            lead = leading(ln)
            width = len(lead.expandtabs(step))
            out.append("\t" * (width // step) + " " * (width % step) + ln[len(lead):])
        return "\n".join(out)
    if not any("\t" in leading(ln) for ln in lines):
        return completion
    return "\n".join(leading(ln).replace("\t", unit) + ln[len(leading(ln)):] for ln in lines)


def align_first_line(completion: str, line_prefix: str, expected: str | None) -> str:
    """Make the first line land at ``expected`` indentation when the cursor is on a blank line.

    A model often repeats the indentation already typed before the cursor, or
    (at column 0) leaves a block body unindented; later lines keep their own
    indentation unless the whole completion is shallower than the body.
    """
    if expected is None or line_prefix.strip():
        return completion
    lines = completion.split("\n")
    first = lines[0]
    if not first.strip():
        return completion
    total = line_prefix + leading(first)
    if total == expected:
        return completion
    new_lead = expected[len(line_prefix):] if expected.startswith(line_prefix) else ""
    lines[0] = new_lead + first.lstrip(" \t")
    if len(total) < len(expected):
        rest = [ln for ln in lines[1:] if ln.strip()]
        if rest and all(len(leading(ln)) < len(expected) for ln in rest):
            shift = expected[: len(expected) - len(total)] if expected.startswith(total) else ""
            lines[1:] = [shift + ln if ln.strip() else ln for ln in lines[1:]]
    return "\n".join(lines)


def rescale_steps(completion: str, base: int, unit: str) -> str:
    """Re-indent later lines from the completion's step (e.g. 4 spaces) to the document's (e.g. 2).

    Indentation is taken relative to ``base`` (the width the first line stands
    at); only done when every deeper line is a whole number of the
    completion's steps, so odd alignments (continuation lines) are left alone.
    """
    if unit == "\t":
        return completion
    lines = completion.split("\n")
    rel = [len(leading(ln)) - base for ln in lines[1:] if ln.strip()]
    deeper = [r for r in rel if r > 0]
    if not deeper:
        return completion
    step = min(deeper)
    if step == len(unit) or step not in (2, 4, 8) or any(r % step for r in deeper):
        return completion
    out = [lines[0]]
    for ln in lines[1:]:
        r = len(leading(ln)) - base
        if ln.strip() and r > 0:
            ln = " " * base + unit * (r // step) + ln.lstrip(" \t")
        out.append(ln)
    return "\n".join(out)


def body_on_new_line(completion: str, opener_line: str, unit: str) -> str:
    """Start a block body on its own line, one step deeper than the opener's line.

    For indentation languages, where `def f():█` + `return x` would otherwise
    put the body on the opener's line.
    """
    if not completion.strip() or completion.startswith(("\n", "\r")):
        return completion
    first, _, rest = completion.partition("\n")
    body = "\n" + leading(opener_line) + unit + first.lstrip(" \t")
    return body + ("\n" + rest if rest else "")


def tidy_inline_start(completion: str, line_prefix: str) -> str:
    """A fill that continues a line of code starts with at most one space.

    Models often emit indentation-like runs of spaces at a mid-line hole
    (``value =     None``); after whitespace the cursor already has, none.
    """
    first, sep, rest = completion.partition("\n")
    stripped = first.lstrip(" \t")
    if not stripped or stripped == first:
        return completion
    lead = "" if line_prefix[-1:] in (" ", "\t") else " "
    return lead + stripped + sep + rest


def at_selection_depth(fill: str, text: str, start: int) -> str:
    """`fill` as the new text of a selection of `text` that starts at `start`: where the
    selection starts where its line's code does (blanks before it on the line, code at it), the
    fill's own leading blanks go, since the user chose where that line's code starts. The engine
    keeps a fill's deeper indentation after blanks typed at a line's start (a span cut inside a
    line's indentation goes on to the line's depth: healing.unheal); a selection that starts
    inside the indentation, or at a line's first column, keeps the fill as it is."""
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start]
    if not before or before.strip() or text[start:start + 1] in (" ", "\t"):
        return fill
    return fill.lstrip(" \t")
