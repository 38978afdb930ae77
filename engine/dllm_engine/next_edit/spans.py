"""Which spans of the editable region to re-mask: pure functions over text.

Two sources, because each misses what the other finds:
- the last edit: a name it removed or replaced that still stands elsewhere in
  the region (`def f(count)` became `def f(total)`: every `count` below is
  stale). Stale uses vouch for each other when the model scores one token at a
  time, so scoring alone misses them. An insertion inside `name(...)` (an added
  parameter) seeds the argument lists of the other `name(...)` in the region;
- the scoring pass: the tokens the model finds least likely given the rest.
Every span is widened to whole words, so the denoiser never gets half a name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .request import RecentEdit

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_ARGUMENT_LIST_CHARS = 200
CLEAR_PREFERENCE = 0.3  # a suspicious token is a span only where the model's own choice has at least this


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    source: str  # "edit" | "score" | "caller" | "region"
    # The span's text as the edit suggests it: for a stale use of a renamed name, the name the
    # edit wrote; for another argument list of a function given a parameter, the list with the
    # added item. The other holes read this span with it in their context (service._context),
    # so stale uses do not vouch for each other; the stream drafts it first (region_pass.py).
    hint: str = ""
    # What the edit makes of this span: "rename" (a stale use), "argument" (another argument
    # list of the function a parameter was added to), "" (no expectation). A fill of a span the
    # edit seeded is a proposal only if it does what the edit did (`follows_edit`).
    kind: str = ""


def region_bounds(text: str, start_line: int, end_line: int) -> tuple[int, int]:
    """Character offsets of lines [start_line, end_line) (the last line's break included)."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    lo = starts[start_line]
    hi = starts[end_line] if end_line < len(starts) else len(text)
    return lo, hi


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def widen_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    """Grow [start, end) so it neither starts nor ends inside a word."""
    while start > 0 and _is_word_char(text[start - 1]) and start < len(text) and _is_word_char(text[start]):
        start -= 1
    while end < len(text) and end > 0 and _is_word_char(text[end - 1]) and _is_word_char(text[end]):
        end += 1
    return start, end


def _words(text: str) -> set[str]:
    return set(WORD.findall(text))


def replaced_words(document: str, edit: RecentEdit) -> set[str]:
    """Identifiers the edit took out of the document: in the old text of the words it touched,
    absent from their new text (a rename typed as several keystrokes reads as one word)."""
    lo, hi = widen_to_words(document, edit.offset, edit.offset + len(edit.inserted))
    new_words = document[lo:hi]
    old_words = document[lo:edit.offset] + edit.removed + document[edit.offset + len(edit.inserted):hi]
    return _words(old_words) - _words(new_words)


def new_words(document: str, edit: RecentEdit) -> set[str]:
    """Identifiers the edit put in, in the words it touched (the new name of a rename)."""
    lo, hi = widen_to_words(document, edit.offset, edit.offset + len(edit.inserted))
    old_words = document[lo:edit.offset] + edit.removed + document[edit.offset + len(edit.inserted):hi]
    return _words(document[lo:hi]) - _words(old_words)


def occurrences(document: str, word: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Whole-word occurrences of `word` within [lo, hi)."""
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])")
    return [(m.start(), m.end()) for m in pattern.finditer(document, lo, hi)]


def enclosing_call_name(document: str, offset: int) -> str | None:
    """The name before the innermost `(` still open at `offset` on its line, if any."""
    line_start = document.rfind("\n", 0, offset) + 1
    depth = 0
    for i in range(offset - 1, line_start - 1, -1):
        ch = document[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", document[line_start:i])
                return m.group(1) if m else None
            depth -= 1
    return None


def _argument_lists(document: str, name: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """The inside of `name(...)` for each call/definition of `name` in [lo, hi) closed on its line."""
    spans = []
    for m in re.finditer(rf"(?<![A-Za-z0-9_.]){re.escape(name)}\s*\(", document[lo:hi]):
        open_at = lo + m.end()
        depth, i = 1, open_at
        while i < min(hi, open_at + MAX_ARGUMENT_LIST_CHARS) and document[i] != "\n":
            depth += {"(": 1, ")": -1}.get(document[i], 0)
            if depth == 0:
                spans.append((open_at, i))
                break
            i += 1
    return spans


def adds_argument(edit: RecentEdit) -> bool:
    """An insertion of a new list item (`, unit`): inside `name(...)`, its calls follow."""
    return "," in edit.inserted and not edit.removed.strip()


def edit_seeds(document: str, edits: list[RecentEdit], lo: int, hi: int) -> list[Span]:
    """Spans of [lo, hi) that the recent edits made stale (the newest edit's own text excluded)."""
    last = edits[-1] if edits else None
    if last is None:
        return []
    own = (last.offset, last.offset + len(last.inserted))
    words: set[str] = set()
    for edit in edits:  # an older rename's stale uses are as stale as the newest's
        if 0 <= edit.offset <= len(document):
            words |= replaced_words(document, edit) if edit is last else _words(edit.removed) - _words(edit.inserted)
    renamed, written = replaced_words(document, last), new_words(document, last)
    hint = next(iter(written)) if len(written) == 1 and len(renamed) == 1 else ""  # one name became one name
    spans = [Span(s, e, "edit", hint if w in renamed else "", "rename" if w in renamed and hint else "")
             for w in sorted(words) for s, e in occurrences(document, w, lo, hi)]
    name = enclosing_call_name(document, last.offset) if adds_argument(last) else None
    if name is not None:  # an argument added to `name(...)`: the other argument lists follow
        item = _squeeze(last.inserted.strip().lstrip(","))
        spans += [Span(s, e, "edit", added_argument(document[s:e], last.inserted), "argument")
                  for s, e in _argument_lists(document, name, lo, hi)
                  if not _squeeze(document[s:e]).endswith(item)]  # a call already given it is done
    return [s for s in spans if s.end <= own[0] or s.start >= own[1]]


def added_argument(arguments: str, inserted: str) -> str:
    """An argument list with the item the edit added to the definition (`, unit`) appended."""
    item = inserted.strip().lstrip(",").strip()
    return f"{arguments}, {item}" if arguments.strip() else item


def follows_edit(span: Span, original: str, new: str) -> bool:
    """Whether a fill does to `span` what the edit did: a stale use comes back as the new name
    (a stale use filled with another name, `1` or `cur_len`, is no follow-up of a rename), an
    argument list keeps its items and gains one. Spans the edit did not seed pass."""
    if span.kind == "rename":
        return span.hint in WORD.findall(new)
    if span.kind == "argument":
        kept, grown = _squeeze(original), _squeeze(new)
        return grown.startswith(kept) and len(grown) > len(kept) and (not kept or grown[len(kept)] == ",")
    return True


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def code_uses_only(seeds: list[Span], document: str, renamed: set[str], named: list[tuple[int, int]],
                   complete: bool = False) -> list[Span]:
    """The seeds left when a caller that parses the code named the uses of the renamed names
    and the calls' argument lists (`named`): an occurrence of a renamed name it did not name is
    in a string or a comment (a docstring's mention of a parameter), or out of the rename's
    scope (the same name in the next function), which the rename does not reach; an argument
    list it did not name is a docstring's example call. `complete`: the caller says `named` is
    all of them, so naming none means none (else an empty `named` means no parse: every seed)."""
    if not named and not complete:
        return seeds
    return [s for s in seeds if (document[s.start:s.end] not in renamed and s.kind != "argument")
            or any(a < s.end and b > s.start for a, b in named)]


def could_seed(document: str, token: tuple[int, int, float, float], threshold: float) -> bool:
    """Whether a scored token (start, end, probability, best alternative's) can be a score-found
    span: under `threshold`, where the model has a clear preference, not whitespace."""
    start, end, prob, alternative = token
    return prob < threshold and alternative >= CLEAR_PREFERENCE and bool(document[start:end].strip())


def score_seeds(document: str, scored: list[tuple[int, int, float, float]], threshold: float, limit: int,
                avoid: tuple[int, int]) -> list[Span]:
    """The `limit` least likely scored tokens under `threshold`, widened to words.

    `scored`: (start, end, probability, best alternative's probability) per token, document
    offsets. A token counts only where the model also has a clear preference (an unlikely
    token among many unlikely ones, as at the top of a file, is no evidence). Whitespace
    tokens are never spans (an indentation change is not an edit to propose); `avoid` is the
    newest edit's own text, which the user just wrote."""
    picked = []
    for start, end, prob, alternative in sorted(scored, key=lambda t: t[2]):
        if len(picked) >= limit or prob >= threshold:
            break
        if not could_seed(document, (start, end, prob, alternative), threshold) \
                or (start <= avoid[1] and end >= avoid[0]):  # touching the edit is editing it
            continue
        s, e = widen_to_words(document, start, end)
        # Leading blanks stay context: the denoiser gets the token's text, not the indentation before it.
        while s < e and document[s] in " \t":
            s += 1
        picked.append(Span(s, e, "score"))
    return picked


def whole_region(document: str, lo: int, hi: int, avoid: tuple[int, int]) -> list[Span]:
    """The baseline: every line of [lo, hi) but those the newest edit touched, as at most two spans."""
    edit_lo = document.rfind("\n", 0, avoid[0]) + 1
    edit_hi = document.find("\n", avoid[1])
    edit_hi = len(document) if edit_hi < 0 else edit_hi + 1
    spans = []
    if edit_lo > lo:
        spans.append(Span(lo, edit_lo, "region"))
    if hi > edit_hi:
        spans.append(Span(max(edit_hi, lo), hi, "region"))
    return [s for s in spans if s.end > s.start and document[s.start:s.end].strip()]


def merge(spans: list[Span], cursor: int, limit: int) -> list[Span]:
    """Overlapping spans as one (the earlier source named), the `limit` nearest the cursor, in order."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if merged and span.start < merged[-1].end:
            prev = merged[-1]
            end = max(prev.end, span.end)
            # The same place named twice (a stale use the caller also found) keeps its hint;
            # a span grown from two places has none.
            same = next((x for x in (prev, span) if x.hint and (x.start, x.end) == (prev.start, end)), None)
            merged[-1] = Span(prev.start, end, prev.source, same.hint if same else "", same.kind if same else "")
        else:
            merged.append(span)
    nearest = sorted(merged, key=lambda s: min(abs(s.start - cursor), abs(s.end - cursor)))[:limit]
    return sorted(nearest, key=lambda s: s.start)
