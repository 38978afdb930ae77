"""A suspicious token that is part of a misspelled name: the hint covers the name, its fix is the spelling.

The engine scores tokens, and a typo spans several of them (`queyr` is `qu`, `ey`, `r` to the
default model's tokenizer). Where the model, at one of them, prefers a token that completes a
near spelling of the written name (`query` at `qu`), the name is misspelled: the hint covers
the whole name and its quick fix writes the spelling, not `query` in place of `qu`
(`queryeyr`). Near spellings also tell typos from guesses: where the default model prefers
a different name (`options` for `documents`) it is guessing (diagnostics.select), while a near
spelling seldom comes up where code is as written (benchmarks/bench_scoring.py: 5-6 hints on
40 regions of this repository, against 13-25 of 40 typos flagged, in two samples).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from typing import TypeVar

# A name whose model-preferred spelling is this close to it (difflib's ratio) is a misspelling:
# `queyr`/`query` 0.80, `tyeps`/`types` 0.80, `defautl`/`default` 0.86; a different name
# (`documents`/`options`) is far below it.
NEAR_SPELLING = 0.75
WORD = re.compile(r"\w+")
T = TypeVar("T")  # a diagnostics.SuspiciousToken


def as_misspelling(token: T, text: str) -> T:
    """`token` as a candidate for the name it is part of, when its alternative spells that name
    differently but nearly alike (NEAR_SPELLING); else `token` unchanged."""
    shown = text[token.start:token.end]
    at = token.start + len(shown) - len(shown.lstrip())  # the token's first visible character
    alternative = token.alternative.strip()
    if not WORD.match(text, at) or not WORD.fullmatch(alternative or "-"):
        return token
    begin = at
    while begin > 0 and WORD.match(text[begin - 1]):
        begin -= 1
    word = WORD.match(text, begin)
    if token.alternative[:1].isspace() and at > word.start():
        return token  # the alternative starts a new word where this token continues one
    spelled = word.group()[: at - word.start()] + alternative
    if spelled == word.group() or difflib.SequenceMatcher(None, spelled, word.group()).ratio() < NEAR_SPELLING:
        return token
    return replace(token, start=word.start(), end=word.end(), alternative=spelled, misspelling=True)
