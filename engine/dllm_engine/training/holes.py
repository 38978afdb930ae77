"""Where to cut a hole in a tokenized file, so training matches what editors ask for.

Kinds (weights in HOLE_KINDS): a whole line, several lines, an indented block
(a header line and its more-indented body), the rest of a line from a cursor
inside it, and a random token span. Line kinds start and end on newline token
boundaries (the tokenizer isolates "\\n", so a line tokenizes the same alone as
inside its file); a whole line includes its indentation and its newline, as
HumanEval's single-line middles do.

The caller asks for a hole that suits a canvas of length L, in one of the
states the engine's decoder actually visits (engine.py: a variable-length fill
starts in the smallest bucket and doubles the canvas, keeping the committed
head, until an end pad appears):
  first   1 <= n          the first canvas, nothing committed yet (n >= L: no pad)
  grown   L/2 <= n        a doubled canvas whose first L/2 slots are committed
  oracle  n == L          a caller-given length (canvas = max_tokens = n)
  loose   1 <= n < L      a caller-fixed bucket larger than the fill
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BUCKETS = (8, 16, 32, 64, 128)
MAX_HOLE = 128
HOLE_KINDS = {"line": 0.30, "lines": 0.20, "block": 0.15, "line_rest": 0.15, "span": 0.20}
TRIES = 16


@dataclass(frozen=True)
class Span:
    start: int  # token index in the file
    end: int  # exclusive
    kind: str

    @property
    def length(self) -> int:
        return self.end - self.start


def length_range(mode: str, canvas_len: int) -> tuple[int, int]:
    """Inclusive [lo, hi] hole lengths allowed for `mode` at canvas length L."""
    if mode == "first":
        return 1, 4 * MAX_HOLE
    if mode == "grown":
        return max(1, canvas_len // 2), 4 * canvas_len
    if mode == "oracle":
        return canvas_len, canvas_len
    if mode == "loose":
        return 1, canvas_len - 1
    raise ValueError(f"unknown hole mode {mode!r}")


def committed_head(mode: str, canvas_len: int) -> int:
    """Slots at the start of the canvas that the decoder has already committed in this state."""
    return canvas_len // 2 if mode == "grown" else 0


class HoleSampler:
    """Samples hole spans in one file; `indent_of_token` gives each token's leading-space count."""

    def __init__(self, newline_id: int, indent_of_token: np.ndarray, blank_token: np.ndarray) -> None:
        self.newline_id = newline_id
        self.indent_of_token = indent_of_token  # int per id: leading spaces (-1: token has non-space text)
        self.blank_token = blank_token  # bool per id: whitespace only (spaces/tabs/newline)
        self.kinds = list(HOLE_KINDS)
        self.kind_p = np.asarray([HOLE_KINDS[k] for k in self.kinds])

    @classmethod
    def from_vocab(cls, vocab: dict[str, int], newline_id: int) -> "HoleSampler":
        """Build the per-token tables from a byte-level BPE vocabulary (token text -> id)."""
        size = max(vocab.values()) + 1
        indent = np.full(size, -1, dtype=np.int32)
        blank = np.zeros(size, dtype=bool)
        for text, tid in vocab.items():
            spaces = len(text) - len(text.lstrip("Ġ"))  # "Ġ" is the byte-level spelling of " "
            rest = text[spaces:]
            if rest == "":
                indent[tid] = spaces
            else:
                indent[tid] = -1 - spaces  # -1-k: k leading spaces, then text
            blank[tid] = all(ch in "ĠĉĊ" for ch in text)  # space, tab, newline
        return cls(newline_id, indent, blank)

    # -- line structure ---------------------------------------------------
    def line_starts(self, f: np.ndarray) -> np.ndarray:
        starts = np.concatenate(([0], np.flatnonzero(f == self.newline_id) + 1))
        return starts[starts < len(f)]

    def indent(self, f: np.ndarray, start: int, end: int) -> int | None:
        """Leading spaces of the line f[start:end]; None for a blank line."""
        total = 0
        for tok in f[start:end]:
            code = int(self.indent_of_token[int(tok)])
            if code >= 0:
                if int(tok) == self.newline_id:
                    return None
                total += code
            else:
                return total + (-1 - code)
        return None

    # -- kinds --------------------------------------------------------------
    def _lines(self, rng, f, starts, count: int) -> Span:
        i = int(rng.integers(len(starts)))
        j = min(len(starts), i + count)
        end = starts[j] if j < len(starts) else len(f)
        return Span(int(starts[i]), int(end), "line" if count == 1 else "lines")

    def _block(self, rng, f, starts) -> Span:
        ends = np.append(starts[1:], len(f))
        i = int(rng.integers(len(starts)))
        base = self.indent(f, starts[i], ends[i])
        if base is None:
            return Span(int(starts[i]), int(ends[i]), "line")
        last = i
        for j in range(i + 1, min(len(starts), i + 64)):
            ind = self.indent(f, starts[j], ends[j])
            if ind is not None and ind <= base:
                break
            if ind is not None:
                last = j
        return Span(int(starts[i]), int(ends[last]), "block")

    def _line_rest(self, rng, f, starts) -> Span:
        ends = np.append(starts[1:], len(f))
        i = int(rng.integers(len(starts)))
        stop = int(ends[i]) - (1 if f[ends[i] - 1] == self.newline_id else 0)  # the newline stays in the suffix
        if stop - starts[i] < 1:
            return Span(int(starts[i]), int(ends[i]), "line")
        cut = int(rng.integers(starts[i], stop))
        return Span(cut, stop, "line_rest")

    def _span(self, rng, f, lo: int, hi: int) -> Span:
        hi = max(lo, min(hi, MAX_HOLE if lo <= MAX_HOLE else hi, len(f) - 1))
        n = int(np.exp(rng.uniform(np.log(lo), np.log(hi + 1))))
        n = min(max(n, lo), hi, len(f))
        start = int(rng.integers(0, len(f) - n + 1))
        return Span(start, start + n, "span")

    def sample(self, rng: np.random.Generator, f: np.ndarray, mode: str, canvas_len: int) -> Span:
        """A hole in file `f` whose length suits (mode, canvas_len); line kinds by rejection."""
        lo, hi = length_range(mode, canvas_len)
        starts = self.line_starts(f)
        for _ in range(TRIES):
            kind = self.kinds[int(rng.choice(len(self.kinds), p=self.kind_p))]
            if kind == "span":
                break
            if kind == "line":
                span = self._lines(rng, f, starts, 1)
            elif kind == "lines":
                span = self._lines(rng, f, starts, int(rng.integers(2, 9)))
            elif kind == "block":
                span = self._block(rng, f, starts)
            else:
                span = self._line_rest(rng, f, starts)
            if lo <= span.length <= hi and not self.blank_token[f[span.start:span.end]].all():
                return span
        return self._span(rng, f, lo, hi)
