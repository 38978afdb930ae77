"""Where a fill starts looping: `Hole.stop_repeats`' rule, on the fill's text.

A small base loops: `{test.name} - {test.name} - ...` in a line, or the same line (or group of
lines) again and again, until max_tokens. The language server cuts such a fill after the loop's
first unit (shaping's drop_repetition): in 4 of 40 multi-line fills of the standard library the
fill had run to its 64 tokens, 26-31 passes, for 13-34 kept tokens (benchmarks/RESULTS.md,
sixteenth session). So the engine applies the same rule after each pass and ends the fill as
soon as its committed text holds a loop: the passes after it are never run.

The rule is the server's, restated here (the engine does not import the server):
- a line repeated three times in a row, or a group of 2-4 lines twice, unless the unit is
  trivial (under 4 characters, or only closing brackets and separators): cut after the unit;
  only complete lines count while the fill is running (its last line may still grow);
- in a line, the first run of a phrase of 4 or more characters three times in a row, if the
  phrase has more than one distinct character and at least 3 that are not blanks: cut after
  the phrase's first copy, and nothing after that line is kept.
"""

from __future__ import annotations

import re

REPEATED_RUN = re.compile(r"(.{4,}?)\1{2,}")
_TRIVIAL_CHARS = ")]}" + ";,"


def typed_indent(prefix: str) -> str:
    """The blanks before the cursor on its line (its whole line so far, when only blanks)."""
    line = prefix[prefix.rfind("\n") + 1:]
    return line if not line.strip() else ""


def _trivial(lines: list[str]) -> bool:
    content = "".join(line.strip() for line in lines)
    return len(content) < 4 or all(ch in _TRIVIAL_CHARS for ch in content)


def repeat_cut(text: str, indent: str = "", final: bool = False) -> int:
    """The offset in `text` where a fill that loops is cut, or -1 when it holds no loop (yet).
    `indent`: blanks before the cursor on its line (typed_indent: the first line is compared as
    it will stand in the document); `final`: the fill is complete, so its last line counts too."""
    lines = text.split("\n")
    whole = lines if final else lines[:-1]
    placed = [indent + whole[0], *whole[1:]] if whole else []
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    kept, cut = len(lines), -1  # lines kept by a repeated line or group, and where they end
    for i in range(len(placed)):
        k = next((k for k in range(1, 5) if _repeats_from(placed, i, k)), None)
        if k is not None:
            kept = i + k
            cut = starts[kept] - 1 if kept < len(lines) else len(text)
            break
    for i, line in enumerate(lines[:kept]):  # a phrase looping in a line comes first, as in shaping
        m = _looping_phrase(line)
        if m:
            return starts[i] + m.start() + len(m.group(1))
    return cut


def loop_seen(text: str, indent: str, clean: str) -> tuple[bool, str]:
    """While a fill runs: whether `text` holds a loop (repeat_cut(text, indent) >= 0), looking
    only at the lines completed since `clean` (an earlier head of the fill found without one,
    ending at a line break; "" at first). Returns (loop, the new clean head). A pass checks its
    new lines, not the whole fill again: the phrase search costs ~35 us a line, and a block fill
    of 14 lines was ~0.7 ms a pass checked whole."""
    if not text.startswith(clean):  # the head changed (a re-masked token): check it all again
        clean = ""
    lines = text.split("\n")
    complete = len(lines) - 1
    placed = [indent + lines[0], *lines[1:complete]]
    for j in range(clean.count("\n"), complete):  # the windows ending at each newly complete line
        for k in range(1, 5):
            start = j - (3 if k == 1 else 2) * k + 1
            if start >= 0 and _repeats_from(placed, start, k):
                return True, clean
        if _looping_phrase(lines[j]):
            return True, clean
    if _looping_phrase(lines[-1]):  # the line still growing
        return True, clean
    return False, text[: len(text) - len(lines[-1])]


def _looping_phrase(line: str) -> "re.Match[str] | None":
    """The first phrase run in `line` that counts as a loop, or None. The search goes on past a
    run that does not count: a line indented 12 blanks or more starts with one (three copies of
    4 blanks), and stopping there hid every loop in the lines three levels deep."""
    m = REPEATED_RUN.search(line)
    while m and not (len(set(m.group(1))) > 1 and len(m.group(1).strip()) >= 3):
        m = REPEATED_RUN.search(line, m.start() + 1)
    return m


def _repeats_from(lines: list[str], i: int, k: int) -> bool:
    """Whether the k lines from line i come again right after (three times in all for one line)."""
    unit = lines[i:i + k]
    repeats = 3 if k == 1 else 2
    return len(unit) == k and not _trivial(unit) and all(
        lines[i + r * k:i + (r + 1) * k] == unit for r in range(1, repeats))
