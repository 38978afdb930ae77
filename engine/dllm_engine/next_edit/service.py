"""One next-edit request: score the region, choose spans, denoise them together, read back.

A model that reads a canvas left to right (the default model: a shifted-logit base in blocks
of 1) runs steps 1, 3 and 4 on one stream over the region (region_pass.py, streamed.py): one
cached context for every span, no scoring pass afterwards. Other models (the small native
one) run them on the engine's public calls (`score`, `submit`): `Engine.next_edit` calls
`propose(self, ...)`.

1. one capped scoring pass over the region around the cursor (what looks wrong);
2. spans: the last edit's stale names and argument lists, the least likely
   tokens, the caller's spans; merged, nearest the cursor first, capped (mentions of a
   renamed name the caller did not name as code uses left out);
3. the spans filled (variable length: a span may come back shorter or longer): on the
   stream, left to right, each until it rejoins the text after it; else every span a hole
   of one batched infill, each seeing the document as it is around it;
4. the confidence of each changed span: from the stream's own forwards, or a scoring pass
   over the new text.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

from ..protocol import Hole, InfillRequest, ProtocolError, RequestCancelled, ScoreRequest
from . import streamed
from .streamed import DROP
from .region_pass import RegionPass, supports
from .request import EditSpan, NextEditRequest, NextEditResult
from .spans import (WORD, Span, code_uses_only, edit_seeds, follows_edit, merge, region_bounds, replaced_words,
                    score_seeds, whole_region, widen_to_words)

# Context around the region (the stream) or around each span (holes: each encodes its own,
# suffix first, so holes of one file share no cached prefix).
PREFIX_CHARS, SUFFIX_CHARS = 1200, 600
# The stream's (half as much): on a 2-core CPU its first forward, over context and region at
# ~1.3 ms a token, was most of a next edit's latency; with half the context it reads a third
# fewer tokens and the quick benchmark's proposals were the same (benchmarks/RESULTS.md, tenth session).
STREAM_PREFIX_CHARS, STREAM_SUFFIX_CHARS = 600, 300
PREFACE_CHARS = 400  # of the newest edit's lines, when the stream would not read them in time (_unseen_edit)
SCORE_CHARS = 3600  # a scoring pass takes at most 4000 characters
SCORE_STRIDE = 4
MAX_SCORE_SPANS = 4  # score-found spans per request: the rest of the budget is the edit's
POLL_S = 0.05


def propose(engine, request: NextEditRequest, cancel: threading.Event | None = None) -> NextEditResult:
    """The next edit in `request`'s region, or no change; raises ProtocolError for a bad request."""
    t0 = time.perf_counter()
    request.validate()
    doc = request.document
    lo, hi = region_bounds(doc, request.region_start_line, request.region_end_line)
    if hi - lo > 24_000:
        raise ProtocolError(f"region of {hi - lo} characters is too long (max 24000)")
    last = request.last_edit
    own = (last.offset, last.offset + len(last.inserted)) if last else (request.cursor, request.cursor)
    scored_tokens = 0
    # A model that reads a canvas left to right gets one stream for the whole request (region_pass.py).
    seeds = edit_seeds(doc, request.edits, lo, hi) if request.mode != "whole_region" else []
    deadline = None if request.deadline_s is None else time.monotonic() + request.deadline_s
    rp = (RegionPass(engine, doc[max(0, lo - STREAM_PREFIX_CHARS):lo], doc[lo:hi], doc[hi:hi + STREAM_SUFFIX_CHARS],
                     cancel, deadline, origin=lo, preface=_unseen_edit(doc, lo, last, seeds))
          if supports(engine) else None)
    if request.mode == "whole_region":
        spans = whole_region(doc, lo, hi, own)
    else:
        # Caller spans are re-masked as they are, unless they are the caller's list of the code uses
        # (`spans_are_uses`): then they only say which of the edit's seeds are code (below), and a
        # call already given the added argument is not re-masked for being on the list.
        seeds += [Span(*widen_to_words(doc, max(lo, s.start), min(hi, s.end)), "caller")
                  for s in request.spans if s.start < hi and s.end > lo and not request.spans_are_uses]
        score = (lambda: streamed.score_after_edit(rp, doc, lo, hi, request)) if rp else (
            lambda: _score_region(engine, doc, lo, hi, request))
        # An edit outside the region (the server's region around a far use of a renamed name)
        # changed no token's probability in it but through the context: the scores would only
        # find the names any code is full of, and their free fills cost a forward each.
        away = last is not None and not lo <= last.offset <= hi
        scored = score() if request.score_tokens and not away else []
        scored_tokens = len(scored)
        taken = [(s.start, s.end) for s in seeds]
        # A token touching a seed is that seed's to change (one stream span cannot end where the next begins).
        fresh = [t for t in scored if not any(t[0] <= e + 1 and t[1] >= s - 1 for s, e in taken)]
        spans = seeds + score_seeds(doc, fresh, request.suspicious_below, MAX_SCORE_SPANS, own)
        if last is not None:  # the scores find a docstring's mention of a renamed name too
            spans = code_uses_only(spans, doc, replaced_words(doc, last), [(s.start, s.end) for s in request.spans],
                                   request.spans_are_uses)
    spans = merge(spans, request.cursor, request.max_spans)
    _check(cancel)
    edits = (streamed.rewrite(rp, doc, spans) if rp else _denoised_edits(engine, doc, spans, request, cancel)) \
        if spans else []
    edits = [e for e in edits if _follows(e, spans)]
    new_doc = _apply(doc, [(Span(e.start, e.end, e.source), e.new) for e in edits])
    new_hi = hi + sum(len(e.new) - (e.end - e.start) for e in edits)
    return NextEditResult(
        request_id=request.request_id, region_start_line=request.region_start_line,
        region_end_line=request.region_end_line, region_text=new_doc[lo:new_hi], spans=edits,
        masked_spans=len(spans), scored_tokens=scored_tokens, model=engine.model_name,
        elapsed_ms=(time.perf_counter() - t0) * 1000,
    )


def _unseen_edit(doc: str, lo: int, last, seeds: list[Span]) -> str:
    """The newest edit's lines, when the stream would not read them before the first stale use
    it left (the region is around a call far from the renamed `def`, or a use comes before the
    `def` it follows): read ahead of the context, so the new name is there to copy (without it,
    the model's probability of `dedent_impl` at a call of `dedent` was 0.04, under any sane
    threshold). Empty when the stream reads the edit first anyway."""
    if last is None or not seeds:
        return ""
    first = min(s.start for s in seeds)
    if lo - STREAM_PREFIX_CHARS <= last.offset and last.offset + len(last.inserted) <= first:
        return ""
    start = doc.rfind("\n", 0, last.offset) + 1
    end = doc.find("\n", last.offset + len(last.inserted))
    return doc[start:len(doc) if end < 0 else end + 1][:PREFACE_CHARS]


def _denoised_edits(engine, doc: str, spans: list[Span], request: NextEditRequest,
                    cancel: threading.Event | None) -> list[EditSpan]:
    """Every span a hole of one batched infill with its own context, then one scoring pass over
    the new text for the confidences (models whose canvas is bidirectional)."""
    fills = _denoise(engine, doc, spans, request, cancel)
    fills = [_as_word(doc[s.start:s.end], new) for s, new in zip(spans, fills)]
    # A seeded span whose fill does not do what the edit did (a stale use filled with another
    # name) is read as the edit suggests it instead, at the model's probability of that (the
    # scoring pass below): the threshold, not the free fill, decides (as on the stream).
    fills = [new if follows_edit(s, doc[s.start:s.end], new) or not s.hint else s.hint for s, new in zip(spans, fills)]
    changed = [(span, new) for span, new in zip(spans, fills) if new != doc[span.start:span.end]]
    confidences = _confidences(engine, _apply(doc, changed), changed) if changed else []
    return [EditSpan(s.start, s.end, doc[s.start:s.end], new, conf, s.source)
            for (s, new), conf in zip(changed, confidences)]


def _follows(edit: EditSpan, spans: list[Span]) -> bool:
    """A changed span is proposed only if it does what the edit did to every seed it covers."""
    return all(follows_edit(s, edit.original, edit.new) for s in spans if s.start < edit.end and s.end > edit.start)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise RequestCancelled("next-edit request cancelled")


def _score_window(engine, doc: str, lo: int, hi: int, cursor: int, budget: int) -> tuple[int, int]:
    """At most `budget` tokens (and SCORE_CHARS characters) of [lo, hi), centred on the cursor."""
    a = max(lo, min(cursor, hi) - SCORE_CHARS // 2)
    b = min(hi, a + SCORE_CHARS)
    a = max(lo, b - SCORE_CHARS)
    _, offsets = engine.tokenizer.encode_with_offsets(doc[a:b])
    if len(offsets) <= budget:
        return a, b
    centre = next((i for i, (s, _) in enumerate(offsets) if a + s >= cursor), len(offsets) - 1)
    first = max(0, min(centre - budget // 2, len(offsets) - budget))
    window = offsets[first:first + budget]
    return a + window[0][0], a + window[-1][1]


def _scores(engine, doc: str, a: int, b: int) -> list[tuple[int, int, float, float]]:
    result = engine.score(ScoreRequest(prefix=doc[max(0, a - PREFIX_CHARS):a], span=doc[a:b],
                                       suffix=doc[b:b + SUFFIX_CHARS], stride=SCORE_STRIDE))
    return [(a + t.start, a + t.end, t.prob, t.alternative_prob) for t in result.tokens]


def _score_region(engine, doc: str, lo: int, hi: int, request: NextEditRequest) -> list[tuple[int, int, float, float]]:
    """(start, end, probability, the best alternative's probability) per scored token, in document
    offsets, for the tokens the newest edit made unlikely.

    A token unlikely before the edit too (a name chosen at its definition, the first line of
    a file) is no sign of a follow-up edit: the window is scored again as it read before the
    edit, and a token counts only if its probability fell to under DROP of what it was."""
    a, b = _score_window(engine, doc, lo, hi, request.cursor, request.score_tokens)
    if not doc[a:b].strip():
        return []
    after = _scores(engine, doc, a, b)
    last = request.last_edit
    if last is None or not (a <= last.offset <= b):
        return after
    old_doc = doc[:last.offset] + last.removed + doc[last.offset + len(last.inserted):]
    delta = len(last.inserted) - len(last.removed)
    old_b = max(a + 1, min(len(old_doc), b - delta))
    if not old_doc[a:old_b].strip():
        return after
    before = {}
    for start, end, prob, _ in _scores(engine, old_doc, a, old_b):
        if end <= last.offset:
            before[(start, end)] = prob
        elif start >= last.offset + len(last.removed):
            before[(start + delta, end + delta)] = prob
    return [t for t in after if (t[0], t[1]) in before and t[2] < DROP * before[(t[0], t[1])]]


def _context(doc: str, span: Span, spans: list[Span]) -> tuple[str, str]:
    """The text before and after `span` as its hole reads it: the other stale uses of the
    renamed name shown with the name the user wrote. Left as they are, each stale use would
    vouch for the old name in every other hole (the model fills each hole given the rest);
    the fill of every hole is still the model's own."""
    lo, hi = max(0, span.start - PREFIX_CHARS), min(len(doc), span.end + SUFFIX_CHARS)
    before, after, last_b, last_a = [], [], lo, span.end
    for other in spans:
        if other is span or not other.hint:
            continue
        if lo <= other.start and other.end <= span.start:
            before += [doc[last_b:other.start], other.hint]
            last_b = other.end
        elif span.end <= other.start and other.end <= hi:
            after += [doc[last_a:other.start], other.hint]
            last_a = other.end
    return "".join(before) + doc[last_b:span.start], "".join(after) + doc[last_a:hi]


def _hole(engine, doc: str, span: Span, spans: list[Span]) -> Hole:
    original = doc[span.start:span.end]
    n = len(engine.tokenizer.encode(original)) if original else 1
    max_tokens = min(1024, 2 * n + 8)  # room to grow: an added argument, a longer name
    # A span inside one line is refilled inside that line: a line break ends it.
    stop = ("\n",) if "\n" not in original else ()
    prefix, suffix = _context(doc, span, spans)
    return Hole(prefix=prefix, suffix=suffix, max_tokens=max_tokens, bucket=min(max_tokens, n + 2), stop=stop)


def _denoise(engine, doc: str, spans: list[Span], request: NextEditRequest,
             cancel: threading.Event | None) -> list[str]:
    infill = InfillRequest(holes=[_hole(engine, doc, s, spans) for s in spans], params=request.params,
                           priority=request.priority, deadline_s=request.deadline_s)
    handle = engine.submit(infill)
    while True:
        try:
            result = handle.result(timeout=POLL_S)
            break
        except FutureTimeout:
            if cancel is not None and cancel.is_set():
                handle.cancel()
                raise RequestCancelled("next-edit request cancelled") from None
    return [h.text for h in result.holes]


def _as_word(original: str, new: str) -> str:
    """A name is refilled by a name: the fill of a one-word span is its first word (the
    canvas may grow past it into the code after the span, which the suffix already holds);
    a fill that does not start with a word leaves the name as it was."""
    if not WORD.fullmatch(original):
        return new
    m = WORD.match(new)
    return m.group(0) if m else original


def _apply(doc: str, changed: list[tuple[Span, str]]) -> str:
    out, last = [], 0
    for span, new in changed:
        out += [doc[last:span.start], new]
        last = span.end
    out.append(doc[last:])
    return "".join(out)


def _confidences(engine, new_doc: str, changed: list[tuple[Span, str]]) -> list[float]:
    """Per changed span, the geometric mean probability of its new tokens in the new text
    (a deletion: of the tokens that meet where it was), from one scoring pass."""
    starts, shift = [], 0
    for span, new in changed:
        starts.append(span.start + shift)
        shift += len(new) - (span.end - span.start)
    places = [(s, s + len(new)) for s, (_, new) in zip(starts, changed)]
    a = max(0, places[0][0] - 1)
    b = min(len(new_doc), places[-1][1] + 1)
    groups = [(a, b, places)] if b - a <= SCORE_CHARS else [(max(0, p[0] - 1), min(len(new_doc), p[1] + 1), [p])
                                                            for p in places]
    out = []
    for ga, gb, members in groups:
        try:
            scored = engine.score(ScoreRequest(prefix=new_doc[max(0, ga - PREFIX_CHARS):ga], span=new_doc[ga:gb],
                                               suffix=new_doc[gb:gb + SUFFIX_CHARS], stride=SCORE_STRIDE)).tokens
        except ProtocolError:  # too many tokens for one pass: no confidence rather than no answer
            out += [0.0] * len(members)
            continue
        for s, e in members:
            lo, hi = (s, e) if e > s else (s - 1, s + 1)
            probs = [t.prob for t in scored if ga + t.start < hi and ga + t.end > lo]
            out.append(math.exp(sum(math.log(max(p, 1e-9)) for p in probs) / len(probs)) if probs else 0.0)
    return out
