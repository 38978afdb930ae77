"""Mercury Edit's "apply edit": merge an update snippet into the original code.

The snippet is the new code with the unchanged stretches elided by marker lines
(`// ... existing code ...`, `# ... existing code ...`, `<!-- ... existing code ... -->`).
Each stretch of snippet lines between markers is placed in the original by its lines
that the original also holds (difflib's longest matching blocks, in order): it
replaces the original from its first such line to its last, lines before or after
those being insertions. A marker keeps the original between two placed stretches;
two stretches with no marker between them are contiguous, so what lay between them
in the original is deleted. Original code before the first and after the last
stretch is kept (a snippet rarely bothers with leading/trailing markers).

Every new line is written in the snippet and every kept line is the original's, so
the merge is exact and needs no model: what remains open is only where a stretch
goes. A stretch that shares no line with the original (all new code, e.g. a method
to add) goes right after the stretch before it, or at the end of the file.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# "... existing code ...", "... rest of the code ...", "... unchanged ..." in any comment style.
MARKER = re.compile(r"^\s*(//|#|--|;|/\*|<!--|\{/\*)?\s*\.\.\.?\s*(existing code|rest of (the )?(code|file)|unchanged)"
                    r"[^\n]*$", re.IGNORECASE)


ALIKE = 0.75  # difflib ratio from which a new line is read as an edit of the old one beside it


@dataclass
class Placed:
    start: int  # first original line the stretch replaces
    end: int  # one past the last
    lines: list[str]
    after_marker: bool  # a marker stood between it and the stretch before


def is_marker(line: str) -> bool:
    return bool(MARKER.match(line.rstrip("\n")))


def stretches(snippet: str) -> list[tuple[list[str], bool]]:
    """The snippet's runs of code lines, each with whether a marker came before it."""
    out: list[tuple[list[str], bool]] = []
    current: list[str] = []
    current_marker = pending_marker = False
    for line in _lines(snippet):
        if is_marker(line):
            if current:
                out.append((current, current_marker))
                current = []
            pending_marker = True
            continue
        if not current:
            current_marker, pending_marker = pending_marker, False
        current.append(line)
    if current:
        out.append((current, current_marker))
    return out


def apply_edit(original: str, snippet: str) -> str:
    orig = original.splitlines(keepends=True)
    placed: list[Placed] = []
    cursor = 0
    for lines, after_marker in stretches(snippet):
        p = _place(orig, lines, cursor, after_marker)
        placed.append(p)
        cursor = p.end
    out, kept_until = [], 0
    for i, p in enumerate(placed):
        if i == 0 or p.after_marker:  # the original before the first part, and under a marker, stays
            out += orig[kept_until:p.start]
        out += p.lines
        kept_until = p.end
    out += orig[kept_until:]
    merged = "".join(out)
    if original.endswith("\n") != merged.endswith("\n"):
        merged = merged + "\n" if original.endswith("\n") else merged.rstrip("\n")
    return merged


def _lines(snippet: str) -> list[str]:
    lines = snippet.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


def _place(orig: list[str], lines: list[str], cursor: int, after_marker: bool) -> Placed:
    key = [line.rstrip() for line in orig[cursor:]]
    want = [line.rstrip() for line in lines]
    matcher = difflib.SequenceMatcher(None, want, key, autojunk=False)
    # Blank lines place nothing: they match everywhere.
    blocks = [b for b in matcher.get_matching_blocks() if b.size and any(want[b.a + i] for i in range(b.size))]
    if not blocks:  # all new code: it goes after the part before it, or at the end of the file
        at = cursor if cursor else len(orig)
        return Placed(at, at, _ending_like(lines, orig, at), after_marker)
    start, end = cursor + blocks[0].b, cursor + blocks[-1].b + blocks[-1].size
    # Snippet lines before the first match and after the last edit the original lines next to
    # the span when they look alike (`return 3` -> `return 4`); otherwise they are insertions.
    after = want[blocks[-1].a + blocks[-1].size:]
    while after and end < len(orig) and _alike(after[0], orig[end]):
        after, end = after[1:], end + 1
    before = want[: blocks[0].a]
    while before and start > cursor and _alike(before[-1], orig[start - 1]):
        before, start = before[:-1], start - 1
    return Placed(start, end, lines, after_marker)


def _alike(new: str, old: str) -> bool:
    old = old.rstrip()
    return bool(new.strip() and old.strip()) and difflib.SequenceMatcher(None, new, old).ratio() >= ALIKE


def _ending_like(lines: list[str], orig: list[str], at: int) -> list[str]:
    """New code appended after a last line with no line break gets one between them."""
    if at == len(orig) and orig and not orig[-1].endswith("\n"):
        orig[-1] += "\n"
    return lines
