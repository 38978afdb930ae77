"""Bracket scanning and which openers the document already closes."""

from __future__ import annotations

from dllm_lsp.syntax.brackets import bracket_events, closed_after, unclosed_openers
from dllm_lsp.syntax.context import ContextBudget, completion_context
from dllm_lsp.syntax.languages import language_named
from dllm_lsp.syntax.shaping import shape_completion

JS = language_named("javascript")
PY = language_named("python")
RUST = language_named("rust")


def test_brackets_in_strings_and_comments_are_skipped():
    code = 'f("(", \'[\', `{`) // )\n/* ] */ g(x)'
    assert [ch for _, ch in bracket_events(code, JS)] == ["(", ")", "(", ")"]
    assert [ch for _, ch in bracket_events("f(')')  # (", PY)] == ["(", ")"]


def test_rust_lifetimes_are_not_quotes():
    assert unclosed_openers("fn f<'a>(x: &'a [u8]) -> &'a u8 {", RUST) == ["{"]


def test_unclosed_openers_outermost_first():
    assert unclosed_openers("a = {b: [c(", PY) == ["{", "[", "("]
    assert unclosed_openers("a(b)[c]", PY) == []


def test_closed_after_matches_innermost_first():
    # `}` after the cursor closes the block; the call opened inside it is never closed.
    assert closed_after(["{", "("], "\n}\n", JS, reaches_end=True) == [True, False]
    assert closed_after(["[", "("], ")]", PY, reaches_end=True) == [True, True]
    assert closed_after(["[", "("], "x(y)]", PY, reaches_end=True) == [True, False]
    # A window that stops early says nothing about what lies beyond it.
    assert closed_after(["{", "("], "", JS, reaches_end=False) == [True, True]
    assert closed_after(["{", "("], "", JS, reaches_end=True) == [False, False]


def test_a_needed_closer_is_kept_when_the_window_misses_the_outer_opener():
    # The prefix window starts inside the function, so its `{` is not in view,
    # while its `}` is in the suffix: the call's `)` is still needed.
    body = "".join(f"  const v{i} = {i};\n" for i in range(40))
    text = "function f() {\n" + body + "  foo(\n}\n"
    offset = text.index("foo(") + 4
    ctx = completion_context(text, offset, JS, ContextBudget(prefix_tokens=40))
    assert "function f()" not in ctx.prefix
    shaped = shape_completion(text, offset, "a, b)\n}", ctx, JS)
    assert shaped is not None and shaped.text == "a, b)"
