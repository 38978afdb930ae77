"""Indentation facts about a document, and re-indenting a completion to match it."""

from __future__ import annotations

from collections import Counter


def leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_unit(text: str) -> str:
    """The document's indentation step: a tab, or the most common space step (default 4)."""
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
    return " " * (common[0] if common else 4)


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
