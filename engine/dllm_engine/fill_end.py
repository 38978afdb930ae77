"""Where a fill ends: at the line break (or, inside a line, the character) after which the
model reads the code after the hole best (`Hole.choose_end`).

Why: a pretrained base laid out as our infiller never learned to end a middle. Given room, a
fill runs on past its hole: on HumanEval multi-line holes (1-20 lines) the default model wrote
its 128 tokens, ~10 lines, every time, and 0 of 59 passed. suffix_stop.py ends a fill that
writes the suffix again, but after a middle a small base mostly writes something else. Its own
left-to-right reading knows more: the code after a right middle reads well right after it,
and badly after a line too few or too many. So a finished fill is cut at each of its first
line breaks, every cut is read with the suffix's first tokens (candidate_scoring.py, one
batched causal pass) and the likeliest document keeps its cut (benchmarks/RESULTS.md,
thirtieth session; `dllm-lsp eval --arms var-thr`, paired): HumanEval multi-line
`tasks[::100]` 0 -> 3 of 59 passed, single-line holes filled with variable length `tasks[::5]`
13.5% -> 27.5% (30 won, 1 lost; line mode, which stops at the line break, passes 32%).

At line breaks where the hole ends at a line's end (the suffix starts with its own line break:
a cut ends before a break) or at the next line's start (the suffix starts with the indentation
of a line of the prefix, or deeper: a cut ends after a break). A hole that ends inside a line
(the suffix starts with code, or with a blank or two no line is indented by: most of HumanEval
random-span, a cursor inside a call) fits no line cut. There the fill is cut where it goes on
as the suffix goes on (`span_cuts`: before each of its first `SPAN_CUTS` characters that are
the suffix's first): a fill that wrote the right middle mostly writes what follows it next, and
the code after it starts there. Measured offline over the default model's 164 variable-length
fills of HumanEval random-span `tasks[::10]` (benchmarks/RESULTS.md, forty-third session):
17 -> 24 passed (8 won, 1 lost), 6 cuts a fill (median); a cut at every character of the first
200 passed 25 but read ~200 cuts a fill (4x the time), one at every token boundary 20.
"""

from __future__ import annotations

import dataclasses
import logging

from .candidate_scoring import score_fills
from .protocol import Hole, HoleResult

log = logging.getLogger("dllm_engine")

# The first line breaks of a fill that are tried as its end (then the whole fill): the scoring
# pass reads the fill's rows once (the cuts share them, candidate_scoring.token_tree) and each
# cut's own last tokens and the suffix's first tokens after it. On HumanEval
# multi-line `tasks[::100]` the cut kept was the fill's 1st-7th line break, the whole fill never.
MAX_CUTS = 8

# A hole that ends inside a line: its fill is cut before each of its first SPAN_CUTS characters
# that are the suffix's first (and kept whole), and settled (written no further) at the next
# one. Counted in such characters rather than in text, as MAX_CUTS counts line breaks: a suffix
# that starts with a blank meets one every few characters, one that starts with `)` or a name
# seldom, and a long middle before it stays possible. On HumanEval random-span `tasks[::10]`,
# 16, 32 and every such character of the first 200 chose the same passing cuts.
SPAN_CUTS = 32
INSIDE = "inside a line"


def line_cuts(text: str, limit: int = MAX_CUTS, with_break: bool = True) -> list[str]:
    """The fill up to each of its first `limit` line breaks (with the break, or before it when
    the suffix brings its own), then the whole fill, shortest first, each once; [] when there is
    no choice to make (no line break before the fill's end)."""
    cuts = []
    at = text.find("\n")
    while at >= 0 and len(cuts) < limit:
        cut = text[:at + 1] if with_break else text[:at]
        if cut and cut != text and cut not in cuts:
            cuts.append(cut)
        at = text.find("\n", at + 1)
    return cuts + [text] if cuts else []


def settled_cut(text: str, limit: int = MAX_CUTS) -> int:
    """The offset of the line break after which nothing the fill writes can change the end
    chosen for it, or -1 (not yet): the end is chosen among its first `limit` line breaks and
    the whole, and the last cut's reading needs the indentation of the next line that holds
    something (leaves_open), so the fill is settled at the break that closes that line. Cut
    there, the whole fill is one more line cut; the passes after it are never run."""
    at = -1
    for _ in range(limit):
        at = text.find("\n", at + 1)
        if at < 0:
            return -1
    start = at + 1
    while (at := text.find("\n", start)) >= 0:
        if text[start:at].strip():
            return at
        start = at + 1
    return -1


def _meets(text: str, suffix: str, limit: int) -> list[int]:
    """The offsets of the fill's first `limit` characters that are the suffix's first (never
    its own first character: a cut keeps something)."""
    first, out = suffix[:1], []
    at = text.find(first, 1) if first else -1
    while at >= 0 and len(out) < limit:
        out.append(at)
        at = text.find(first, at + 1)
    return out


def span_cuts(text: str, suffix: str, limit: int = SPAN_CUTS) -> list[str]:
    """The fill up to each of its first `limit` characters where it goes on with the suffix's
    first (the end of a middle the fill wrote whole before running on into the code after it),
    then the whole fill, shortest first; [] when there is no choice to make."""
    cuts = [text[:at] for at in _meets(text, suffix, limit)]
    return cuts + [text] if cuts else []


def span_settled(text: str, suffix: str, limit: int = SPAN_CUTS) -> int:
    """Where a fill whose end is chosen inside a line is settled: at its character after the
    `limit` that span_cuts cuts before (nothing it writes after them can change its cut; cut
    there, the whole fill is one more cut), or -1 (not yet)."""
    meets = _meets(text, suffix, limit + 1)
    return meets[limit] if len(meets) > limit else -1


def settled_end(text: str, end: str, suffix: str) -> int:
    """Where a fill whose end is chosen (`end`: hole_end's answer) may stop, its text cut there
    (the whole fill is then one more cut), or -1 while its end could still change."""
    if end == INSIDE:
        return span_settled(text, suffix)
    at = settled_cut(text)
    return at + (end == "line start") if at >= 0 else -1  # the break kept where the cuts keep theirs


def kept_by_every_cut(text: str, end: str, suffix: str) -> str:
    """The start of a fill that every cut of it keeps, whatever it writes next (`end`:
    hole_end's answer): a stream may send this much before the end is chosen."""
    if end == INSIDE:  # (with no cut yet, the next character may make the whole fill one)
        first = _meets(text, suffix, 1)
        return text[:first[0]] if first else text
    at = text.find("\n")
    if at < 0:
        return text
    return text[: at + 1] if end == "line start" else text[:at]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def hole_end(hole: Hole) -> str:
    """Where the hole ends, read from its suffix: "line end" (the suffix starts with a line
    break), "line start" (with the next line's indentation: one some line of the prefix has, or
    two blanks or more deeper than the prefix's last line, a block the fill opens), INSIDE (with
    code, or with blanks that indent no line: inside a line). No code after the hole (the end
    of the file, where new code is mostly written): a cut keeps its line break unless the
    suffix brings one, and the cuts are read with the base's end of a file after them
    (candidate_scoring.score_fills)."""
    suffix = hole.suffix
    if not suffix.strip():
        return "line end" if suffix.startswith(("\n", "\r\n")) else "line start"
    if suffix.startswith(("\n", "\r\n")):
        return "line end"
    blanks = _indent(suffix)
    if not blanks:
        return INSIDE
    lines = [line for line in hole.prefix.splitlines() if line.strip()]
    if any(_indent(line) == blanks for line in lines):
        return "line start"
    last = _indent(lines[-1]) if lines else ""
    return "line start" if (len(blanks) >= 2 or "\t" in blanks) and len(blanks) > len(last) else INSIDE


# A fill the model ended or that ran out of room; not one cut short (a deadline, the unsure
# gate, whose caller decides what of it to show) or cancelled.
CHOSEN_AFTER = ("end", "max_tokens")


def fixed_length(hole: Hole) -> bool:
    """A hole whose caller fixed the fill's length (its first canvas is all it may have: an
    oracle length, a range regenerated token for token): that length is the end asked for."""
    return hole.bucket is not None and hole.bucket >= hole.max_tokens


def _first_code_line(text: str) -> str | None:
    return next((line for line in text.split("\n") if line.strip()), None)


def leaves_open(hole: Hole, text: str, cut: str) -> bool:
    """Whether ending the fill `text` at `cut` leaves its last line open: the fill's next line
    is indented deeper than it (the body of a block it opens, the rest of a call or a literal
    it started) and the code after the hole is not (nothing there goes on with it). Such a cut
    is never right, yet a small base reads the code after it well enough to pick it: on 60
    empty function bodies of the standard library it kept an `if ...:` or `for ...:` line
    alone in 6, and the editor shows nothing of a lone block opener."""
    lines = (hole.prefix[hole.prefix.rfind("\n") + 1:] + cut).split("\n")  # the cut as it stands in the file
    last = next((line for line in reversed(lines) if line.strip()), None)
    after_cut = _first_code_line(text[len(cut):])
    if last is None or after_cut is None:
        return False
    depth = len(_indent(last))
    return len(_indent(after_cut)) > depth and len(_indent(_first_code_line(hole.suffix) or "")) <= depth


def chosen_end(hole: Hole) -> str | None:
    """Where the hole ends (hole_end) when its fill's end is to be chosen; None when it is not
    (not asked, a fixed length, or a fill that stops at a line break: one line has no line cut,
    and inside a line its line is the fill)."""
    if not hole.choose_end or fixed_length(hole) or "\n" in hole.stop:
        return None
    return hole_end(hole)


def cuts_for(hole: Hole, result: HoleResult) -> list[str]:
    """The cuts a finished fill's end is chosen from; [] when it is not chosen (not asked, a
    fixed length, the fill cut short, or no place to cut it). A line cut that leaves its last
    line open (leaves_open) is not one of them."""
    end = chosen_end(hole)
    if result.finish_reason not in CHOSEN_AFTER or end is None:
        return []
    if end == INSIDE:
        return span_cuts(result.text, hole.suffix)
    cuts = [cut for cut in line_cuts(result.text, with_break=end == "line start")
            if not leaves_open(hole, result.text, cut)]
    return cuts if len(cuts) > 1 else []  # the whole fill alone: nothing to choose


def end_candidates(hole: Hole, results: list[HoleResult]) -> list[tuple[str, int]]:
    """(candidate text, index of the fill it was cut from) for fills that compete (best of N's
    copies, or one fill): each fill's line cuts when its end is chosen, else the fill itself;
    each text once, the first fill's first."""
    out: dict[str, int] = {}
    for i, r in enumerate(results):
        for cut in cuts_for(hole, r) or [r.text]:
            out.setdefault(cut, i)
    return list(out.items())


def choose_end(engine, hole: Hole, result: HoleResult) -> HoleResult:
    """`result` cut where it reads likeliest (or kept whole); the scoring counts as a pass.
    Any failure keeps the fill as it is: it is still an answer."""
    cuts = cuts_for(hole, result)
    if not cuts:
        return result
    try:
        scores = score_fills(engine, hole.prefix, hole.suffix, cuts, hole.max_tokens)
    except Exception:
        log.exception("reading %d ends of a fill failed; keeping it whole", len(cuts))
        return result
    best = max(range(len(cuts)), key=lambda i: (scores[i], -i))  # a tie keeps the shorter fill
    reason = "end" if len(cuts[best]) < len(result.text) else result.finish_reason
    return dataclasses.replace(result, text=cuts[best], finish_reason=reason, passes=result.passes + 1)
