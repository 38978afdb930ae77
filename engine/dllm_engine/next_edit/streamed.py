"""The next-edit steps on one left-to-right stream (region_pass.py), for models that read a
canvas left to right: the scoring window and the spans' fills from one cached context.
"""

from __future__ import annotations

from .region_pass import PassSpan, RegionPass
from .request import EditSpan, NextEditRequest
from .spans import WORD, Span, could_seed

DROP = 0.25  # a token the edit made at least 4x less likely is a candidate


def score_after_edit(rp: RegionPass, doc: str, lo: int, hi: int,
                     request: NextEditRequest) -> list[tuple[int, int, float, float]]:
    """(start, end, probability, best alternative's) in document offsets for the tokens the
    newest edit made unlikely: tokens that can be spans now (spans.could_seed: under
    `request.suspicious_below`, a clear preference, not whitespace), and under DROP of what they
    were before the edit.

    A token's probability depends only on the text before it, so the tokens before the edit
    read as they did: the window starts at the edit (at the cursor without one in the
    region), and the text as it read before the edit is scored from the same place (up to the
    last token that could be a span, and not at all when none can), so a token counts only if
    its probability fell to under DROP of what it was (a name chosen at its definition is
    unlikely before the edit too)."""
    last = request.last_edit
    in_region = last is not None and lo <= last.offset <= hi
    at = rp.origin  # the document offset the stream's region starts at
    start = (last.offset if in_region else min(max(request.cursor, lo), hi)) - at
    after = [t for t in ((at + s, at + e, p, a) for s, e, p, a in rp.score(rp.region, start, request.score_tokens))
             if t[1] <= hi and could_seed(doc, t, request.suspicious_below)]
    if not in_region or not after:
        return after
    rel = last.offset - at
    old_region = rp.region[:rel] + last.removed + rp.region[rel + len(last.inserted):]
    delta = len(last.inserted) - len(last.removed)
    until = max(e for _, e, _, _ in after) - at - delta  # the last suspicious token, as the old text has it
    before = {}
    for s, e, p, _ in rp.score(old_region, start, request.score_tokens + 8, until=max(until, rel + len(last.removed))):
        if e <= rel:
            before[(at + s, at + e)] = p
        elif s >= rel + len(last.removed):
            before[(at + s + delta, at + e + delta)] = p
    return [t for t in after if (t[0], t[1]) in before and t[2] < DROP * before[(t[0], t[1])]]


def rewrite(rp: RegionPass, doc: str, spans: list[Span]) -> list[EditSpan]:
    """The changed spans of one left-to-right rewrite of `spans`, each trimmed to what changed
    (the fill replaces whole tokens, so it may repeat a blank or a bracket on either side)."""
    lo = rp.origin
    passes = [PassSpan(s.start - lo, s.end - lo, "\n" not in doc[s.start:s.end],
                       1 if doc[s.start:s.end].strip() else 0, s.hint, WORD.fullmatch(doc[s.start:s.end]) is not None,
                       guessed=s.source == "score" or (s.source == "edit" and not s.hint))
              for s in spans]
    out = []
    for fill in rp.rewrite(passes):
        original = rp.region[fill.start:fill.end]
        if fill.finish != "rejoined" or fill.text == original:
            continue
        a, b, new = _trim(fill.start, fill.end, original, fill.text)
        source = next((s.source for s in spans if s.start - lo < fill.end and s.end - lo > fill.start), "region")
        out.append(EditSpan(lo + a, lo + b, rp.region[a:b], new, fill.confidence, source))
    return out


def _trim(start: int, end: int, original: str, new: str) -> tuple[int, int, str]:
    """Drop the blanks and punctuation the original and the fill share at either end."""
    i = 0
    while i < min(len(original), len(new)) and original[i] == new[i] and not _word_char(original[i]):
        i += 1
    j = 0
    while (j < min(len(original), len(new)) - i and original[-1 - j] == new[-1 - j]
           and not _word_char(original[-1 - j])):
        j += 1
    return start + i, end - j, new[i:len(new) - j]


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
