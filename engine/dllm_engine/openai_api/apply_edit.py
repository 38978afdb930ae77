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
where the alignment is unambiguous the merge is exact and needs no model. Where it is
not, the merge stops at a `Spot` with its `Option`s (each a way to merge made only of
original and snippet lines, the alignment's guess first) and asks `decide` which one
(apply_edit_model.py lets the diffusion model write the region and takes the option
nearest to what it wrote; without a `decide`, the guess stands):
- a seam: a stretch's new line beside the original line that a marker stands for, alike
  enough to be an edit of it but not clearly (difflib ratio in [0.4, 0.75)): either the
  original line stays and the new line is inserted, or the new line replaces it;
- an anchor that matches in several places: the stretch's shared lines occur more than
  once after the stretch before it; each occurrence is a placement.
A stretch that shares no line with the original (all new code, e.g. a method to add)
goes right after the stretch before it, or at the end of the file.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

# "... existing code ...", "... rest of the code ...", "... unchanged ..." in any comment style.
MARKER = re.compile(r"^\s*(//|#|--|;|/\*|<!--|\{/\*)?\s*\.\.\.?\s*(existing code|rest of (the )?(code|file)|unchanged)"
                    r"[^\n]*$", re.IGNORECASE)


ALIKE = 0.75  # difflib ratio from which a new line is read as an edit of the old one beside it
UNRELATED = 0.4  # below this a new line beside an old one is an insertion; in between, a seam to decide
MAX_PLACEMENTS = 4  # placements of one ambiguous anchor offered to the model (nearest first)


@dataclass
class Placed:
    start: int  # first original line the stretch replaces
    end: int  # one past the last
    lines: list[str]
    after_marker: bool  # a marker stood between it and the stretch before
    lead: int = 0  # leading snippet lines inserted before the span's first shared line
    trail: int = 0  # trailing snippet lines inserted after its last


@dataclass(frozen=True)
class Option:
    """One way to merge at a spot: the text it puts in the region, and the region's context."""

    prefix: str  # the merged text before the region
    text: str  # what this option puts there
    suffix: str  # the text after the region


@dataclass(frozen=True)
class Spot:
    kind: str  # "seam" or "anchor"
    line: int  # the original line (0-based) where the question arises
    options: tuple[Option, ...]  # the alignment's guess first


Decide = Callable[[Spot], int]


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


def apply_edit(original: str, snippet: str, decide: Decide | None = None) -> str:
    orig = original.splitlines(keepends=True)
    decide = decide or (lambda spot: 0)
    parts = stretches(snippet)
    placed: list[Placed] = []
    cursor = 0
    for i, (lines, after_marker) in enumerate(parts):
        kept_after = i + 1 == len(parts) or parts[i + 1][1]  # the original after it stays (marker or end)
        p = _choose_placement(orig, lines, cursor, after_marker, placed, decide)
        p = _settle_seams(orig, p, cursor, placed, kept_after, decide)
        placed.append(p)
        cursor = p.end
    merged = _assemble(orig, placed, len(orig))
    if original.endswith("\n") != merged.endswith("\n"):
        merged = merged + "\n" if original.endswith("\n") else merged.rstrip("\n")
    return merged


def _assemble(orig: list[str], placed: list[Placed], upto: int) -> str:
    """The merged text of the stretches placed so far, then the original kept after them up to `upto`."""
    out, kept_until = [], 0
    for i, p in enumerate(placed):
        if i == 0 or p.after_marker:  # the original before the first part, and under a marker, stays
            out += orig[kept_until:p.start]
        out += p.lines
        kept_until = p.end
    out += orig[kept_until:upto]
    return "".join(out)


def _lines(snippet: str) -> list[str]:
    lines = snippet.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


def _blocks(orig: list[str], lines: list[str], lo: int, hi: int):
    key = [line.rstrip() for line in orig[lo:hi]]
    want = [line.rstrip() for line in lines]
    matcher = difflib.SequenceMatcher(None, want, key, autojunk=False)
    # Blank lines place nothing: they match everywhere.
    return want, [b for b in matcher.get_matching_blocks() if b.size and any(want[b.a + i] for i in range(b.size))]


def _place(orig: list[str], lines: list[str], cursor: int, after_marker: bool, lo: int | None = None,
           hi: int | None = None) -> Placed:
    """The stretch placed by its shared lines found in orig[lo:hi] (default: from the cursor on)."""
    lo = cursor if lo is None else lo
    want, blocks = _blocks(orig, lines, lo, len(orig) if hi is None else hi)
    if not blocks:  # all new code: it goes after the part before it, or at the end of the file
        at = cursor if cursor else len(orig)
        return Placed(at, at, _ending_like(lines, orig, at), after_marker)
    start, end = lo + blocks[0].b, lo + blocks[-1].b + blocks[-1].size
    # Snippet lines before the first match and after the last edit the original lines next to
    # the span when they look alike (`return 3` -> `return 4`); otherwise they are insertions
    # (or, when they look half alike, a seam that _settle_seams asks about).
    after = want[blocks[-1].a + blocks[-1].size:]
    while after and end < len(orig) and _ratio(after[0], orig[end]) >= ALIKE:
        after, end = after[1:], end + 1
    before = want[: blocks[0].a]
    while before and start > cursor and _ratio(before[-1], orig[start - 1]) >= ALIKE:
        before, start = before[:-1], start - 1
    return Placed(start, end, lines, after_marker, lead=len(before), trail=len(after))


def _choose_placement(orig, lines, cursor, after_marker, placed, decide: Decide) -> Placed:
    first = _place(orig, lines, cursor, after_marker)
    if first.start == first.end or (placed and not after_marker):
        return first  # new code, or contiguous with the stretch before: nowhere else it could go
    _, blocks = _blocks(orig, lines, cursor, len(orig))
    anchor = _key(orig[cursor + blocks[0].b: cursor + blocks[-1].b + blocks[-1].size])
    starts = [q for q in range(cursor, len(orig) - len(anchor) + 1) if _key(orig[q:q + len(anchor)]) == anchor]
    candidates = [first]
    for q in starts:
        c = _place(orig, lines, cursor, after_marker, lo=q, hi=q + len(anchor))
        if all((c.start, c.end) != (d.start, d.end) for d in candidates):
            candidates.append(c)
    if len(candidates) < 2:
        return first
    candidates = candidates[:MAX_PLACEMENTS]
    before = _assemble(orig, placed, cursor)
    text = "".join(lines)
    # Each option is the stretch written over one placement (with the half alike lines beside it
    # that it may replace), the original around it as context.
    reach = [_reach(orig, c, cursor) for c in candidates]
    options = tuple(Option(prefix=before + "".join(orig[cursor:lo]), text=text, suffix="".join(orig[hi:]))
                    for lo, hi in reach)
    return candidates[_checked(decide(Spot("anchor", first.start, options)), options)]


def _settle_seams(orig: list[str], p: Placed, cursor: int, placed: list[Placed], kept_after: bool,
                  decide: Decide) -> Placed:
    """Where a new line at the stretch's edge is half alike the original line beside it, ask."""
    lines = p.lines
    if p.start == p.end:
        return p
    # Leading: new lines before the span, beside an original line that a marker (or the file's
    # start) keeps: the old line stays with the new ones inserted after it, or they replace it.
    if p.lead and p.start > cursor and (p.after_marker or not placed) \
            and UNRELATED <= _ratio(lines[p.lead - 1], orig[p.start - 1]) < ALIKE:
        x = p.start - 1
        prefix, new = _assemble(orig, placed, x), "".join(lines[:p.lead])
        suffix = "".join(lines[p.lead:] + orig[p.end:])
        options = (Option(prefix, orig[x] + new, suffix), Option(prefix, new, suffix))
        if _checked(decide(Spot("seam", x, options)), options) == 1:
            p = Placed(x, p.end, lines, p.after_marker, lead=p.lead - 1, trail=p.trail)
    # Trailing: new lines after the span, beside an original line that the marker after them keeps.
    if p.trail and p.end < len(orig) and kept_after \
            and UNRELATED <= _ratio(lines[-p.trail], orig[p.end]) < ALIKE:
        x = p.end
        kept_before = p.after_marker or not placed  # else the original before the span was deleted
        prefix = _assemble(orig, placed, p.start if kept_before else cursor) + "".join(lines[:-p.trail])
        new, suffix = "".join(lines[-p.trail:]), "".join(orig[x + 1:])
        options = (Option(prefix, new + orig[x], suffix), Option(prefix, new, suffix))
        if _checked(decide(Spot("seam", x, options)), options) == 1:
            p = Placed(p.start, x + 1, lines, p.after_marker, lead=p.lead, trail=p.trail - 1)
    return p


def _reach(orig: list[str], p: Placed, cursor: int) -> tuple[int, int]:
    """The original lines a placed stretch may replace: its span, and a half alike line beside it."""
    lo, hi = p.start, p.end
    if p.lead and lo > cursor and _ratio(p.lines[p.lead - 1], orig[lo - 1]) >= UNRELATED:
        lo -= 1
    if p.trail and hi < len(orig) and _ratio(p.lines[-p.trail], orig[hi]) >= UNRELATED:
        hi += 1
    return lo, hi


def _key(lines: list[str]) -> list[str]:
    return [line.rstrip() for line in lines]


def _checked(choice: int, options: tuple[Option, ...]) -> int:
    return choice if isinstance(choice, int) and 0 <= choice < len(options) else 0


def _ratio(new: str, old: str) -> float:
    new, old = new.rstrip(), old.rstrip()
    if not (new.strip() and old.strip()):
        return 0.0
    return difflib.SequenceMatcher(None, new, old).ratio()


def _ending_like(lines: list[str], orig: list[str], at: int) -> list[str]:
    """New code appended after a last line with no line break gets one between them."""
    if at == len(orig) and orig and not orig[-1].endswith("\n"):
        orig[-1] += "\n"
    return lines
