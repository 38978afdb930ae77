"""One left-to-right pass over the editable region, for a shifted-logit model in blocks of 1.

The default model is an autoregressive base in our layout: a hole's fill is the base's own
continuation of `<suf> suffix <pre> prefix`. So the spans of one next-edit request need
no hole (and no context) each: one stream reads `<suf> after-region <pre> before-region`
and then the region, token by token, in one cached context:
- known tokens (outside the spans) are appended as they are, their K/V computed in bulk
  (one forward per run of known text, as accepted drafts are) and kept in the prefix
  cache: the next keystroke's request re-encodes only what follows its edit;
- the scoring window gets the model's probability of each known token from the forward
  that appends it (a token's probability depends only on the text before it, so the text
  as it read before the edit is scored from the edit on, where it differs);
- a span the edit suggests a text for (spans.Span.hint: the new name at a stale use, the
  argument list with the added item) is that text, read in one forward at the model's
  probability of it: the fill's confidence, which the caller's calibrated threshold judges
  (a free fill of a stale use is often another name, which is no follow-up of the rename);
- any other span is generated greedily, with drafts looked up in the original text and checked in
  the same forward (drafting.py's rule), until the generated tokens rejoin the known text
  after the span (REJOIN_TOKENS of them, up to the line's end, all before the next span):
  that is where the span ends, so a fill may come back shorter or longer than what it
  replaces. A fill that does not rejoin within its budget, or breaks a one-line span's
  line, leaves the span as it was.
A fill's confidence is the geometric mean of the model's probabilities of its tokens and
of the first known token after it (how well the change joins the code that follows), read
from the forwards that generated them: no scoring pass afterwards.

Each forward runs on the engine thread between two passes (Engine.between_passes), so inline
completions' passes run in between.
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass

import torch

from .. import mmap_threshold
from ..drafting import accepted_run, lookup_draft
from ..layout import causal_mask, native_context_ids
from ..protocol import ProtocolError, RequestCancelled

# The fill ends where its text runs into the known text after the span: this many tokens of
# it, or up to its line's end if sooner.
REJOIN_TOKENS = 3
LONG_SPAN_TOKENS = 16  # a span longer than this (a whole-region line run) drafts further ahead
LONG_SPAN_DRAFTS = 12
# Drafts of a short span: 1 + 6 rows stay under weight_only.DENSE_ROWS, the int4 kernel's fast range.
SHORT_SPAN_DRAFTS = 6
NAME = re.compile(r"\s*[A-Za-z0-9_]*")
GUESSED_FORWARDS = 6  # per request, for the free fills of guessed spans (PassSpan.guessed)
RESCAN = 24  # fill tokens looked back over for a rejoin (a rejoin starts within the last forwards' tokens)


def supports(engine) -> bool:
    """Whether the engine's model reads a canvas as its own left-to-right continuation."""
    runner = getattr(engine, "runner", None)  # an engine stand-in for protocol tests has none
    return bool(getattr(runner, "shifted", False)) and getattr(runner, "block", 0) == 1 and hasattr(runner, "cache")


@dataclass(frozen=True)
class PassSpan:
    start: int  # character offsets into the region
    end: int
    one_line: bool  # a line break in the fill (before it rejoins) abandons it
    min_tokens: int  # 1: the span may not be deleted outright (a name is not removed)
    # What the span reads as the edit suggests it (a stale use of a renamed name: the new name):
    # read in one forward, it is the fill, at the model's probability of it and of the known
    # token it joins (the caller's threshold judges it); no free generation for such a span.
    guess: str = ""
    word: bool = False  # a name: refilled by a name (a fill that runs on into other code leaves it)
    # A span found by the scores, or a stale use with no text to suggest: a guess that something
    # is wrong. Its free fill draws on the stream's budget of GUESSED_FORWARDS (shared by all
    # such spans of the request); a fill that has not rejoined when it runs out is abandoned and
    # the span kept as it is. Such fills are rarely proposals, and they held up the whole answer
    # (four of them took 1.5 s of 80 ms forwards on one step).
    guessed: bool = False


@dataclass
class PassFill:
    start: int  # region offsets the fill replaces (the span widened to whole tokens)
    end: int
    text: str
    confidence: float
    finish: str  # "rejoined" | "kept" (no rejoin within budget, or a broken line) | "deadline"


class RegionPass:
    """The stream for one request: `prefix` and `suffix` are the text around the region."""

    def __init__(self, engine, prefix: str, region: str, suffix: str,
                 cancel: threading.Event | None = None, deadline: float | None = None, origin: int = 0,
                 preface: str = "") -> None:
        """`origin`: the document offset `region` starts at (streamed.py converts offsets with it);
        `preface`: text read first, ahead of the suffix (the newest edit's lines, when the stream
        would not otherwise read them before the uses they left stale)."""
        self.engine, self.runner, self.tok = engine, engine.runner, engine.tokenizer
        self.origin = origin
        cfg = self.runner.config
        self.suffix_ids = self.tok.encode(suffix)
        self.base = native_context_ids(self.tok.encode(prefix), self.tok.encode(preface) + self.suffix_ids, cfg)
        self.region = region
        self.ids, self.offsets = self.tok.encode_with_offsets(region)
        if len(self.base) + 2 * len(self.ids) + 16 > self.runner.window:
            raise ProtocolError(f"a region of {len(self.ids)} tokens with {len(self.base)} of context does not "
                                f"fit the model's window of {self.runner.window} tokens; send fewer lines")
        self.cancel, self.deadline = cancel, deadline
        self.stream: list[int] = list(self.base)  # committed tokens; the last is held out of the cache
        special = engine.special
        self._banned = list(special.banned)
        self._ends = list(special.end)
        self.forwards = 0
        self.rows = 0
        self.guess_budget = GUESSED_FORWARDS  # forwards left to the free fills of guessed spans

    # ---------------------------------------------------------------- the model

    def _check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise RequestCancelled("next-edit request cancelled")

    def _expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _run(self, extra: list[int], decide, read: list[int] | None = None) -> object:
        """One forward after the cached part of the stream: the rows are the stream's tokens the
        cache does not hold yet (known text appended since the last forward), the held-out last
        token, and `extra` (drafts, or the known tokens being scored).

        `decide(logprobs)` (float [1 + len(extra), V] for the held-out token's row and the
        extra rows, banned tokens at -inf) returns (committed tokens, rows kept, its answer):
        the committed tokens join the stream, and the K/V of the rows up to the first
        `rows kept` of those (exact: each saw only the text before it) join the prefix cache.
        `read`: only the rows that predict these indices of `extra` (the vocabulary head is the
        cost of a row), in that order."""
        self._check()
        runner, dev = self.runner, self.runner.device

        @torch.inference_mode()
        def forward():  # on the engine thread, between passes (engine_calls.py)
            # A wide forward, like a context's encoding: its rows' activations and their logits
            # (a float32 [rows, vocabulary] block and its softmax) are blocks of megabytes, all
            # freed when it ends: from the arena, not each its own mmap (mmap_threshold.py).
            with mmap_threshold.raised():
                return wide_forward()

        def wide_forward():
            t = len(self.stream) - 1  # cached, or run as leading rows
            key, entry, reuse = runner.cache.lookup(torch.tensor(self.stream[:-1], dtype=torch.long), full=True)
            run = self.stream[reuse:] + list(extra)
            lead = t - reuse
            rows = torch.tensor(run, dtype=torch.long, device=dev)[None]  # [1, R]
            positions = torch.arange(reuse, reuse + len(run), device=dev)[None]
            past = ([(entry.buf[i, 0, :, :reuse][None], entry.buf[i, 1, :, :reuse][None])
                     for i in range(entry.buf.shape[0])] if reuse else None)
            want = (torch.arange(len(run), device=dev) >= lead)[None]
            if read is not None:  # the row before extra[r] predicts it; the held-out token's row is lead
                want = torch.zeros(1, len(run), dtype=torch.bool, device=dev)
                want[0, [lead + r for r in read]] = True
            logits, new_kv = runner.model(rows, positions, mask=causal_mask(reuse, len(run), dev), past=past,
                                          logits_rows=want, compact=True, return_kv=True)
            logits = logits.float()
            logits[:, self._banned] = float("-inf")
            self.forwards += 1
            self.rows += len(run)
            committed, kept, answer = decide(logits.log_softmax(-1))
            new_prefix = torch.tensor(self.stream + committed[:-1], dtype=torch.long)
            key, entry, have = runner.cache.lookup(new_prefix, count=False, full=True)
            if reuse <= have < new_prefix.numel():
                kv = torch.stack([torch.stack((k[0, :, have - reuse:lead + kept], v[0, :, have - reuse:lead + kept]))
                                  for k, v in new_kv])
                runner.cache.store(new_prefix, key if have else None, have, kv)
            self.stream += committed
            return answer

        return self.engine.between_passes(forward, "next edit")

    def extend(self, tokens: list[int]) -> None:
        """Known tokens join the stream; their K/V are computed by the next forward that needs them."""
        self.stream += tokens

    def reset(self, tokens: list[int]) -> None:
        self.stream = list(self.base) + tokens

    # ---------------------------------------------------------------- scoring

    def score(self, text: str, lo: int, limit: int, until: int | None = None) -> list[tuple[int, int, float, float]]:
        """(start, end, probability, best alternative's probability) of at most `limit` tokens of
        `text` (the region, or the region as it read before the edit) from offset `lo` on, and
        none that starts at or after `until`."""
        ids, offsets = (self.ids, self.offsets) if text is self.region else self.tok.encode_with_offsets(text)
        first = next((i for i, (_, e) in enumerate(offsets) if e > lo), len(ids))
        stop = first + limit
        if until is not None:
            stop = min(stop, next((i for i, (s, _) in enumerate(offsets) if i >= first and s >= until), len(ids)))
        targets = ids[first:stop]
        if not targets:
            return []
        self.reset(ids[:first])

        def decide(logprobs):
            rows = torch.arange(len(targets))
            probs = logprobs.exp()
            p = probs[rows, torch.tensor(targets)].tolist()
            alt = probs.max(-1).values.tolist()
            return targets, len(targets), list(zip(p, alt))

        scored = self._run(targets[:-1], decide)
        return [(offsets[first + i][0], offsets[first + i][1], p, a) for i, (p, a) in enumerate(scored)]

    # ---------------------------------------------------------------- rewriting

    def token_ranges(self, spans: list[PassSpan]) -> list[tuple[int, int, PassSpan]]:
        """Each span as the tokens [i, j) of the region it overlaps; spans that overlap or
        touch there are one (no known token between them to rejoin)."""
        out: list[tuple[int, int, PassSpan]] = []
        for span in sorted(spans, key=lambda s: s.start):
            i = next((k for k, (_, e) in enumerate(self.offsets) if e > span.start), len(self.ids))
            j = next((k for k, (s, _) in enumerate(self.offsets) if s >= span.end), len(self.ids))
            j = max(j, i + 1) if i < len(self.ids) else i
            if out and i <= out[-1][1]:
                pi, pj, ps = out[-1]
                # Merged: no text to suggest and no word (each was one span's); a guess only if both were.
                out[-1] = (pi, max(pj, j), PassSpan(ps.start, max(ps.end, span.end), ps.one_line and span.one_line,
                                                     min(ps.min_tokens, span.min_tokens),
                                                     guessed=ps.guessed and span.guessed))
            elif i < j:
                out.append((i, j, span))
        return out

    def _char(self, k: int) -> int:
        return self.offsets[k][0] if k < len(self.ids) else len(self.region)

    def rewrite(self, spans: list[PassSpan]) -> list[PassFill]:
        """The spans left to right in one stream; one fill per merged span. The edit's suggestions
        (spans with a guess) between two generated spans are read together, in one forward."""
        ranges = self.token_ranges(spans)
        fills: list[PassFill | None] = []
        self.reset([])
        self._batch: list[int] = []  # known text and suggestions not yet in the stream
        pending: list[tuple[int, int, int, int, int, int]] = []  # (fill, at in batch, tokens, joins, start, end)
        done = 0
        for n, (i, j, span) in enumerate(ranges):
            self._batch += self.ids[done:i]
            nxt = ranges[n + 1][0] if n + 1 < len(ranges) else None
            known = self.ids[j:nxt] if nxt is not None else self.ids[j:] + self.suffix_ids
            start, end = self._char(i), self._char(j)
            if self._expired() or (span.guessed and self.guess_budget <= 0):
                fills.append(PassFill(start, end, self.region[start:end], 0.0, "deadline" if self._expired() else "kept"))
                self._batch += self.ids[i:j]
            elif span.guess:
                guess = self.tok.encode(self.region[start:span.start] + span.guess + self.region[span.end:end])
                pending.append((len(fills), len(self._batch), len(guess), min(1, len(known)), start, end))
                fills.append(None)
                self._batch += guess
            else:
                self._flush(pending, fills)
                fills.append(self._generate(i, j, span, known[:REJOIN_TOKENS]))
            done = j
        if pending:  # the last suggestion's joining token, read with the others
            self._batch += (self.ids[done:] + self.suffix_ids)[:1]
            self._flush(pending, fills)
        return fills

    def _flush(self, pending: list, fills: list) -> None:
        """The batch joins the stream; the suggestions in it are read in one forward: each at the
        model's probability of its tokens and of the known token it joins (the fill's confidence,
        which the caller's threshold judges: the model's free fill of a stale use is often another
        name, which is no follow-up of the edit)."""
        batch, self._batch = self._batch, []
        if not pending:
            self.extend(batch)
            return
        # The known text before the first suggestion joins the stream as it is: its K/V may be in
        # the prefix cache already (the previous keystroke's request), which extra rows never reuse.
        first = pending[0][1]
        self.extend(batch[:first])
        batch = batch[first:]
        pending[:] = [(k, at - first, n, joins, a, b) for k, at, n, joins, a, b in pending]
        read = sorted({r for _, at, n, joins, _, _ in pending for r in range(at, min(len(batch), at + n + joins))})
        where = {r: k for k, r in enumerate(read)}

        def decide(logprobs):
            targets = torch.tensor([batch[r] for r in read])
            probs = logprobs[torch.arange(len(read)), targets].exp().tolist()
            return batch, len(batch), probs

        probs = self._run(batch, decide, read)
        for k, at, n, joins, start, end in pending:
            tail = [probs[where[r]] for r in range(at, min(len(batch), at + n + joins))]
            conf = math.exp(sum(math.log(max(p, 1e-9)) for p in tail) / max(1, len(tail)))
            fills[k] = PassFill(start, end, self.tok.decode(batch[at:at + n]), conf, "rejoined")
        pending.clear()

    def _generate(self, i: int, j: int, span: PassSpan, known: list[int]) -> PassFill:
        original = self.ids[i:j]
        start, end = self._char(i), self._char(j)
        saved = list(self.stream)
        budget = min(1024, 2 * len(original) + 8)
        drafts = LONG_SPAN_DRAFTS if len(original) > LONG_SPAN_TOKENS else SHORT_SPAN_DRAFTS
        ahead = torch.tensor(self.ids[i:] + self.suffix_ids, dtype=torch.long)
        ends = set(self._ends)
        known_text = self.tok.decode(known)
        if "\n" in known_text:  # the rest of the line is enough: the next line is the model's to differ on
            known_text = known_text[:known_text.index("\n") + 1]
        fill: list[int] = []
        probs: list[float] = []
        while True:
            room = min(drafts, budget + len(known) - len(fill))
            if not fill:  # the span as it is, then the text after it
                draft = original + known
            else:  # what followed the fill's last tokens elsewhere (the new name at its definition,
                # the original text), else the text after the span: one forward when the fill is over
                history = torch.cat((ahead, torch.tensor(self.stream, dtype=torch.long)))
                draft = lookup_draft(history, room).tolist() or list(known)
            draft = [t for t in draft if t not in ends][:max(room, 0)]

            def decide(logprobs, draft=draft):
                if known:  # a fill inside the file never ends it
                    logprobs[:, self._ends] = float("-inf")
                best = logprobs.argmax(-1).tolist()
                c = accepted_run(best, draft)
                return best[:c], c, [math.exp(float(logprobs[r, best[r]])) for r in range(c)]

            step_probs = self._run(draft, decide)
            self.guess_budget -= span.guessed
            fill += self.stream[len(saved) + len(fill):]
            probs += step_probs
            cut = self._rejoin(fill, known_text, span.min_tokens, ends)
            if cut is not None:
                self.stream = saved + fill[:cut]
                tail = probs[:cut + 1]
                conf = math.exp(sum(math.log(max(p, 1e-9)) for p in tail) / len(tail))
                return PassFill(start, end, self.tok.decode(fill[:cut]), conf, "rejoined")
            broken = span.one_line and self._breaks_line(fill, known_text, span.min_tokens)
            broken = broken or (span.word and self._runs_past_name(fill, known_text))
            spent = span.guessed and self.guess_budget <= 0
            if broken or spent or len(fill) > budget + len(known) or self._expired():
                self.stream = saved + original
                return PassFill(start, end, self.region[start:end], 0.0, "deadline" if self._expired() else "kept")

    def _rejoin(self, fill: list[int], known: str, min_tokens: int, ends: set[int]) -> int | None:
        """Where the fill ends: the first token boundary from `min_tokens` on after which its text
        runs into the known text after the span (compared as text: the model may split the same
        text into other tokens); an end token where no text follows (the end of the document)."""
        if not known:
            return next((p for p, t in enumerate(fill) if t in ends and p >= min_tokens), None)
        for p in range(max(min_tokens, len(fill) - RESCAN), len(fill)):
            if self.tok.decode(fill[p:]).startswith(known):
                return p
        return None

    def _runs_past_name(self, fill: list[int], known: str) -> bool:
        """The fill's text after its first name is not the known text it would rejoin."""
        text = self.tok.decode(fill)
        rest = text[NAME.match(text).end():]
        return bool(rest) and not (known.startswith(rest) or rest.startswith(known))

    def _breaks_line(self, fill: list[int], known: str, min_tokens: int) -> bool:
        """A line break in the fill that cannot be part of the known text it is running into."""
        q = next((q for q, t in enumerate(fill) if "\n" in self.tok.decode([t])), None)
        if q is None:
            return False
        for p in range(max(min_tokens, q - RESCAN), q + 1):
            text = self.tok.decode(fill[p:])
            if known.startswith(text) or text.startswith(known):
                return False
        return True
