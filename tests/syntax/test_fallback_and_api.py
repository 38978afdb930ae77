"""Unknown languages, the language table, parse checks and shaping edge cases."""

from __future__ import annotations

import pytest

from dllm_lsp.syntax.context import ContextBudget, CompletionContext, completion_context, range_context
from dllm_lsp.syntax.languages import LANGUAGES, language_for, language_named, parser_for
from dllm_lsp.syntax.parse_check import new_error_count
from dllm_lsp.syntax.shaping import ShapedCompletion, shape_completion


# -- language table -------------------------------------------------------------


@pytest.mark.parametrize(
    "path, language_id, name",
    [
        ("file:///a/b.py", None, "python"),
        ("/a/b.pyi", None, "python"),
        ("file:///a/My%20App.tsx", None, "tsx"),
        ("x.ts", None, "typescript"),
        ("x.mjs", None, "javascript"),
        ("x.jsx", None, "javascript"),
        ("x.go", None, "go"),
        ("x.rs", None, "rust"),
        ("x.h", None, "c"),
        ("x.HPP", None, "cpp"),
        ("X.java", None, "java"),
        ("untitled:Untitled-1", "typescriptreact", "tsx"),
        ("x.txt", "python", "python"),  # the client's languageId wins
        ("x.py", "plaintext", "python"),  # an unknown languageId falls back to the extension
    ],
)
def test_language_for(path, language_id, name):
    assert language_for(path, language_id).name == name


@pytest.mark.parametrize("path, language_id", [("x.cob", None), (None, None), ("Makefile", "makefile"), (None, "")])
def test_unknown_language_is_none(path, language_id):
    assert language_for(path, language_id) is None


def test_every_language_parses_and_parsers_are_cached():
    for spec in LANGUAGES:
        assert parser_for(spec) is parser_for(spec)
        assert parser_for(spec).parse(b"").root_node is not None
    assert len({lid for spec in LANGUAGES for lid in spec.language_ids}) == sum(len(s.language_ids) for s in LANGUAGES)


# -- line-based fallback for unknown languages ---------------------------------------


@pytest.mark.parametrize(
    "text, kind",
    [
        ("proc main {\n    █\n}", "block"),
        ("when x:\n█", "block"),
        ("a = 1\n█\nb = 2", "multiline"),
        ("call(█)", "line"),
        ("value = █", "line"),
        ("val█ue", "none"),
        ("it's █", "line"),  # an apostrophe in prose is no open string
    ],
)
def test_unknown_language_context_kinds(text, kind):
    offset = text.index("█")
    text = text.replace("█", "")
    ctx = completion_context(text, offset, None)
    assert ctx.kind == kind
    if kind != "none":
        assert ctx.prefix == text[:offset] and ctx.suffix == text[offset:]


def test_unknown_language_windows_are_whole_lines_within_budget():
    text = "\n".join(f"step {i}: do thing {i}" for i in range(200))
    offset = text.index("\nstep 100")  # end of a line
    ctx = completion_context(text, offset, None, ContextBudget(prefix_tokens=30, suffix_tokens=10))
    assert ctx.kind == "line"
    assert len(ctx.prefix) <= 96 and ctx.prefix.startswith("step ") and text[offset - len(ctx.prefix) - 1] == "\n"
    assert len(ctx.suffix) <= 32 and text[offset + len(ctx.suffix)] == "\n"


def test_unknown_language_shaping_uses_indentation_and_brackets_only():
    text = "proc main {\n    x = 1\n    \n}\n"
    offset = text.index("    \n") + 4
    ctx = completion_context(text, offset, None)
    shaped = shape_completion(text, offset, "y = f(x\n}\nproc other {", ctx, None)
    assert shaped == ShapedCompletion("y = f(x)", offset)


# -- contract edge cases ------------------------------------------------------------


def test_out_of_range_offsets():
    with pytest.raises(ValueError):
        completion_context("abc", 4, None)
    with pytest.raises(ValueError):
        range_context("abc", 2, 1, None)
    ctx = completion_context("x = ", 4, language_named("python"))
    assert shape_completion("x = ", 99, "1", ctx, language_named("python")) is None


def test_none_kind_is_never_shaped():
    ctx = CompletionContext("none", "mid-identifier", "", "", 0, None)
    assert shape_completion("abc", 1, "x", ctx, None) is None


def test_empty_completion_is_dropped():
    python = language_named("python")
    text = "x = "
    assert shape_completion(text, 4, "  \n ", completion_context(text, 4, python), python) is None


def test_crlf_documents_get_crlf_completions():
    python = language_named("python")
    text = "def f(a):\r\n    b = a\r\n    \r\n"
    offset = text.index("    \r\n") + 4
    ctx = completion_context(text, offset, python)
    shaped = shape_completion(text, offset, "c = b\n    return c", ctx, python)
    assert shaped is not None and shaped.text == "c = b\r\n    return c"


def test_range_context_grows_with_the_selection():
    python = language_named("python")
    text = "def f(a):\n    b = a + 1\n    c = b * 2\n    return c\n"
    start, end = text.index("    b"), text.index("    return")
    ctx = range_context(text, start, end, python)
    assert ctx.kind == "multiline" and ctx.reason == "regenerate selection"  # not the whole body
    assert ctx.prefix == text[:start] and ctx.suffix == text[end:]
    big = "def f(a):\n" + "".join(f"    x{i} = a + {i}\n" for i in range(60)) + "    return a\n"
    ctx_big = range_context(big, big.index("    x0"), big.index("    return"), python)
    assert ctx_big.max_tokens > 128 and ctx_big.bucket >= ctx_big.max_tokens // 2
    line = range_context("x = foo(1, 2)\n", 4, 13, python)
    assert (line.kind, line.max_tokens, line.bucket) == ("line", 24, 16)


@pytest.mark.parametrize(
    "name, text, hole",
    [
        ("python", "def f(a):\n    pass\n", "pass"),
        ("python", "def f(a): ...\n", "..."),
        ("rust", "fn f() -> u8 {\n    todo!()\n}\n", "todo!()"),
        ("java", "class A { int f() { return 0; } }", " return 0; "),
    ],
)
def test_range_context_placeholder_bodies_are_blocks(name, text, hole):
    start = text.index(hole)
    ctx = range_context(text, start, start + len(hole), language_named(name))
    assert ctx.kind == "block" and ctx.max_tokens >= 128


def test_tree_argument_is_used_as_given():
    from dllm_lsp.syntax.languages import parse

    python = language_named("python")
    text = "def f():\n    s = 'abc'\n"
    tree = parse(text, python)
    offset = text.index("abc") + 1
    assert completion_context(text, offset, python, tree=tree).reason == "inside string"


# -- parse check ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, original, filled, added",
    [
        ("python", "x = 1\n", "x = (1\n", 1),
        ("python", "x = (\n", "x = (1)\n", 0),
        ("c", "int main(){}", "int main(){ return 0 }", 1),
        ("rust", "fn main() {}", "fn main() { let x = 1; }", 0),
        ("java", "class A {}", "class A { int x = ; }", 1),
    ],
)
def test_new_error_count(name, original, filled, added):
    assert new_error_count(original, filled, language_named(name)) == added


def test_new_error_count_with_inserted_span_sees_replaced_errors():
    js = language_named("javascript")
    original = "const x = "
    filled = "const x = a +* b;"
    assert new_error_count(original, filled, js) == 0  # one error replaced another
    assert new_error_count(original, filled, js, inserted=(10, len(filled))) == 1
    assert new_error_count(original, "const x = a + b;", js, inserted=(10, 16)) == 0


def test_python_indentation_errors_count_though_tree_sitter_accepts_them():
    """tree-sitter-python parses an unexpected indent inside a block without an ERROR node."""
    py = language_named("python")
    original = "def f(a):\n    ...\n\nx = 2\n"
    bad = 'def f(a):\n    """\n    doc\n        """\n        return 1\n\nx = 2\n'
    good = 'def f(a):\n    """\n    doc\n    """\n    return 1\n\nx = 2\n'
    assert new_error_count(original, bad, py) == 1
    assert new_error_count(original, bad, py, inserted=(14, len(bad) - 7)) == 1
    assert new_error_count(original, good, py) == 0
    # A document that does not compile already (being typed) is left to tree-sitter.
    assert new_error_count("def f(a):\n    return (\n", "def f(a):\n    return (\n        1\n", py) == 0


def test_new_error_count_unknown_language_is_zero():
    assert new_error_count("a", "a (((", None) == 0


@pytest.mark.parametrize("between", ["\n\n", ""])
def test_a_fill_on_an_indented_line_after_a_function_is_judged_with_that_function(between):
    """The blank indented line after a function's last statement belongs to its body; the
    compile check must see the function, not only the next statement (or nothing at the end)."""
    py = language_named("python")
    tail = "\n\ndef g():\n    return 2\n" if between else ""
    text = f"def f(a):\n    b = a\n    {tail}"
    offset = text.index("b = a\n") + len("b = a\n    ")
    filled = text[:offset] + "return b" + text[offset:]
    assert new_error_count(text, filled, py, inserted=(offset, offset + len("return b"))) == 0
    bad = text[:offset] + "    return b" + text[offset:]
    assert new_error_count(text, bad, py, inserted=(offset, offset + len("    return b"))) == 1


def test_a_suggested_block_header_at_the_end_is_incomplete_not_wrong():
    """Ghost text may open a block (`if b:`) for the user to fill; a written file may not."""
    py = language_named("python")
    text = "def f(a):\n    b = a\n    "
    header = "if b:"
    filled = text + header
    assert new_error_count(text, filled, py, inserted=(len(text), len(filled))) == 0
    assert new_error_count(text, filled, py) == 1  # the whole-file check (refactor, range edits)
    then = text + "\n    return b\n"
    mid = text + header + then[len(text):]
    assert new_error_count(then, mid, py, inserted=(len(text), len(text) + len(header))) == 1
