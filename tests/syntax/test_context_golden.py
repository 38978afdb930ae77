"""Golden tests: completion kind and windows at a cursor, per language (fixtures/context/*.txt)."""

from __future__ import annotations

import pytest

from dllm_lsp.syntax.context import completion_context
from dllm_lsp.syntax.languages import language_named

from .golden import cases_in

CASES = cases_in("context")


def _unescape(value: str) -> str:
    return value.replace("\\n", "\n").replace("\\t", "\t")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_context(case):
    language = language_named(case.source.removesuffix(".txt"))
    assert language is not None, f"no language for fixture file {case.source}"
    text, (offset,) = case.document()
    ctx = completion_context(text, offset, language)
    expect = case.expect()
    assert ctx.kind == expect["kind"], (ctx.kind, ctx.reason)
    if "reason" in expect:
        assert ctx.reason == expect["reason"]
    if "max_tokens" in expect:
        assert ctx.max_tokens == int(expect["max_tokens"])
    if "bucket" in expect:
        assert str(ctx.bucket) == expect["bucket"]
    if "prefix_ends" in expect:
        assert ctx.prefix.endswith(_unescape(expect["prefix_ends"]))
    if "suffix_starts" in expect:
        assert ctx.suffix.startswith(_unescape(expect["suffix_starts"]))
    if ctx.kind == "none":
        assert ctx.prefix == ctx.suffix == ""
    else:
        # Without a budget cut, the windows are the whole text around the cursor.
        assert ctx.prefix == text[:offset] and ctx.suffix == text[offset:]


def test_every_language_has_context_fixtures():
    from dllm_lsp.syntax.languages import LANGUAGES

    covered = {c.source.removesuffix(".txt") for c in CASES}
    assert covered == {spec.name for spec in LANGUAGES}
