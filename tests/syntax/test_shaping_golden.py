"""Golden tests for output shaping, one fixture file per language (fixtures/shaping/*.txt).

Each case: `document` (cursor █, or two █ for a re-masked range), the raw
`completion` from a model, and the `expected` filled document, or `<dropped>`.
Titles start with the rule they exercise; every language covers every rule.
"""

from __future__ import annotations

import pytest

from dllm_lsp.syntax.context import completion_context, range_context
from dllm_lsp.syntax.languages import LANGUAGES, language_named
from dllm_lsp.syntax.parse_check import new_error_count
from dllm_lsp.syntax.shaping import shape_completion

from .golden import cases_in

CASES = cases_in("shaping")
RULES = (
    "end of block",
    "repetition",
    "suffix duplicate",
    "closers",
    "brackets",
    "indentation",
    "parse check",
)


def _shape(case):
    language = language_named(case.source.removesuffix(".txt"))
    text, marks = case.document()
    if len(marks) == 2:  # regenerate a range: the document without it, cursor at its start
        start, end = marks
        ctx = range_context(text, start, end, language)
        text, offset = text[:start] + text[end:], start
    else:
        (offset,) = marks
        ctx = completion_context(text, offset, language)
    shaped = shape_completion(text, offset, case.parts["completion"], ctx, language)
    return language, text, offset, shaped


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_shaping(case):
    language, text, offset, shaped = _shape(case)
    expected = case.parts["expected"]
    if expected.strip() == "<dropped>":
        assert shaped is None, f"expected a drop, got {shaped!r}"
        return
    assert shaped is not None, "completion was dropped"
    filled = text[:offset] + shaped.text + text[shaped.replace_end :]
    assert filled.rstrip("\n") == expected.rstrip("\n"), f"\n--- got\n{filled}\n--- shaped\n{shaped!r}"
    assert new_error_count(text, filled, language) == 0
    if "replace_end" in case.expect():
        assert shaped.replace_end - offset == int(case.expect()["replace_end"])


def test_every_language_covers_every_rule():
    covered = {(c.source.removesuffix(".txt"), rule) for c in CASES for rule in RULES if c.title.startswith(rule)}
    missing = [(spec.name, rule) for spec in LANGUAGES for rule in RULES if (spec.name, rule) not in covered]
    assert not missing, f"shaping fixtures missing for {missing}"
