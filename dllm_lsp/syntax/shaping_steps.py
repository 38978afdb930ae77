"""The string-level steps of output shaping (see shaping.py for their order).

Each step takes the completion text and facts about the cursor's line and
returns a shorter or re-indented text, or None to drop the completion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dllm_lsp.syntax.brackets import CLOSERS
from dllm_lsp.syntax.indentation import leading
from dllm_lsp.syntax.text_lines import is_word, previous_nonblank_line


@dataclass(frozen=True)
class CursorLine:
    """What the steps need to know about the cursor's surroundings."""

    line_prefix: str  # text of the cursor's line before the cursor
    line_suffix: str  # text of the cursor's line after the cursor (no line ending)
    prev_line: str  # previous non-blank line
    expected_indent: str | None  # where a first line on a blank line belongs


def cursor_line(text: str, offset: int, kind: str, unit: str) -> CursorLine:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end
    prev = previous_nonblank_line(text, start)
    line_prefix = text[start:offset]
    expected = None
    if not line_prefix.strip():
        if kind == "block":
            # Indentation the user already typed past the opener line wins over our guess.
            typed = len(line_prefix) > len(leading(prev))
            expected = line_prefix if typed else leading(prev) + unit
        elif line_prefix:
            expected = line_prefix
    return CursorLine(line_prefix, text[offset:end].rstrip("\r"), prev, expected)


# -- repetition ---------------------------------------------------------------

_REPEATED_RUN = re.compile(r"(.{4,}?)\1{2,}")


def _trivial(lines: list[str]) -> bool:
    content = "".join(ln.strip() for ln in lines)
    return len(content) < 4 or all(ch in CLOSERS + ";," for ch in content)


def _looping_phrase(line: str) -> "re.Match[str] | None":
    """The first phrase of 4+ characters three times in a row in `line` that counts as a loop
    (more than one distinct character, 3 or more not blank), or None. The search goes on past
    a run that does not count: a line indented 12 blanks or more starts with one (three copies
    of 4 blanks), and stopping there hid every loop in the lines three levels deep."""
    m = _REPEATED_RUN.search(line)
    while m and not (len(set(m.group(1))) > 1 and len(m.group(1).strip()) >= 3):
        m = _REPEATED_RUN.search(line, m.start() + 1)
    return m


def drop_repetition(completion: str, cur: CursorLine) -> str | None:
    """Cut loops (a line or group of lines repeated, a phrase repeated in a line); drop echoes."""
    lines = completion.split("\n")
    # Compare lines as they will stand in the document: the first one after the typed indentation.
    typed = cur.line_prefix if not cur.line_prefix.strip() else ""
    placed = [typed + lines[0], *lines[1:]]
    for i in range(len(lines)):
        for k in range(1, 5):
            unit = placed[i : i + k]
            repeats = 3 if k == 1 else 2
            if len(unit) == k and not _trivial(unit) and all(
                placed[i + r * k : i + (r + 1) * k] == unit for r in range(1, repeats)
            ):
                lines = lines[: i + k]
                break
        else:
            continue
        break
    out = []
    for line in lines:
        m = _looping_phrase(line)
        if m:
            out.append(line[: m.start() + len(m.group(1))])
            break
        out.append(line)
    first = (cur.line_prefix + out[0]).strip() if out else ""
    if len(first) >= 8 and first == cur.prev_line.strip():
        return None  # the model echoed the line above
    return "\n".join(out)


# -- how many lines are shown ---------------------------------------------------

_TRIPLE = ('"""', "'''")


def cap_lines(completion: str, max_lines: int, first_indent: str = "") -> str:
    """At most `max_lines` lines that hold something, then on to the first line end where every
    bracket opened outside triple-quoted strings is closed. A docstring still open there is cut
    too once it holds some text, and closed: its quotes on a line of their own, at the
    indentation of the line that opened it (`first_indent`: the blanks the fill's first line
    will stand after). Left whole, a docstring that ran on cost seconds and was then dropped
    (it did not parse): 9 of 60 empty bodies' fills never closed theirs in 128 tokens. A
    docstring the fill ends in (it ran out of tokens) is closed the same way.

    Why a cap: a small base's multi-line guess is right, when at all, in its first lines (on 60
    empty function bodies, 24 of the 25 right lines were among the first four; RESULTS.md,
    eighteenth session). The engine ends the fill at the same place (`Hole.max_lines`): the
    rule is restated in engine/dllm_engine/line_cap.py, since this layer imports no engine,
    and a test checks that the two agree."""
    depth, quote, said, opened_on, lines, line_has, i = 0, "", False, 0, 0, False, 0
    text = completion + "\n"  # the fill is complete: its end ends a line (where the engine stopped it)

    def closed(at: int) -> str:
        head = text[:at]
        if quote:
            line = head.split("\n")[opened_on]
            indent = (first_indent if opened_on == 0 else "") + leading(line)
            head = f"{head.rstrip()}\n{indent}{quote}"
        return head

    while i < len(text):
        ch = text[i]
        if ch == "\n":
            lines += line_has
            if lines >= max_lines and depth <= 0 and (not quote or said):
                return closed(i)
            line_has = False
        elif text.startswith(_TRIPLE, i) and (not quote or text.startswith(quote, i)):
            quote, said = ("" if quote else text[i:i + 3]), False
            opened_on = text.count("\n", 0, i)
            line_has = True
            i += 3
            continue
        elif not ch.isspace():
            line_has = True
            if quote:
                said = True
            else:  # brackets in a docstring's prose are not code
                depth += ch in "([{"
                depth -= ch in ")]}"
        i += 1
    # A docstring the fill ends in (it ran out of tokens) is closed too, once it holds text:
    # left open, the whole suggestion is dropped.
    return closed(len(completion)) if quote and said else completion


# -- end of block (indentation) -------------------------------------------------


def stop_at_dedent(completion: str, cur: CursorLine) -> str:
    """Cut before the first later line that leaves the block the completion is in.

    On a blank line that is any line indented less than where the completion
    starts; right after a block opener (`def f():█`) any line not indented
    deeper than the opener's line.
    """
    lines = completion.split("\n")
    if len(lines) < 2:
        return completion
    after_opener = bool(cur.line_prefix.strip())
    base = len(leading(cur.line_prefix)) + 1 if after_opener else len(cur.line_prefix + leading(lines[0]))
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() and len(leading(line)) < base:
            return "\n".join(lines[:i]).rstrip()
    return completion


# -- duplicates of the suffix ---------------------------------------------------


def drop_suffix_duplicate(completion: str, after: str) -> str | None:
    """None if the completion only repeats what follows; trim a tail that the suffix repeats."""
    body = completion.strip()
    if not body:
        return None
    rest = after.lstrip()
    if rest.startswith(body):
        # Only when the match ends at a token boundary: `res` is no duplicate of `result`.
        cut_token = len(rest) > len(body) and is_word(rest[len(body)]) and is_word(body[-1])
        if not cut_token:
            return None
    after_lines = [ln.strip() for ln in after.split("\n") if ln.strip()][:8]
    lines = completion.split("\n")
    content = [i for i, ln in enumerate(lines) if ln.strip()]
    for m in range(min(len(content) - 1, len(after_lines)), 0, -1):
        tail = [lines[i].strip() for i in content[-m:]]
        if tail == after_lines[:m] and not _trivial(tail):
            return "\n".join(lines[: content[-m]]).rstrip()
    first_after = after.split("\n")[0].strip()
    if "\n" not in body and len(first_after) >= 2 and body.endswith(first_after) and body != first_after:
        return completion.rstrip()[: -len(first_after)].rstrip()
    return completion
