"""Best of N's fills ranked by the syntax errors they leave in the file (syntax/fill_choice.py)."""

from __future__ import annotations

from dllm_engine.protocol import HoleResult

from dllm_lsp.commands.infill import parsing_first
from dllm_lsp.syntax.fill_choice import Original, fewest_errors, syntax_errors
from dllm_lsp.syntax.languages import language_named, parse

PY = language_named("python")
LOOP = "def total(xs):\n    s = 0\n    for x in xs:\n        {}\n    return s\n"


def test_errors_count_tree_sitter_s_and_cpython_s():
    assert syntax_errors(LOOP.format("s += x"), PY) == 0
    assert syntax_errors(LOOP.format("s += (x"), PY) >= 1
    # A loop whose body is only a comment: no ERROR node for tree-sitter, but no body for CPython.
    assert syntax_errors(LOOP.format("# add x"), PY) == 1
    js = language_named("javascript")
    assert syntax_errors("function f(x) { return x +; }", js) >= 1
    assert syntax_errors("function f(x) { return x + 1; }", js) == 0


def test_a_block_opened_at_the_end_of_what_is_written_is_not_an_error():
    assert syntax_errors("def f(xs):\n    t = 0\n    for x in xs:\n", PY) == 0
    assert syntax_errors("def f(xs):\n    for x in xs:\n    return t\n", PY) == 1  # a body is due before code
    js = language_named("javascript")
    assert syntax_errors("function f(xs) {\n  for (const x of xs) {\n", js) == 0  # its } not typed yet
    assert syntax_errors("function f(xs) {\n  return xs +;\n", js) >= 1


def test_the_first_fill_with_the_fewest_errors_wins_and_ties_keep_the_model_s_order():
    filled = [LOOP.format(f) for f in ("", "# add x", "s += x", "s = s + x")]
    assert fewest_errors(filled, PY) == 2  # the best-read fills leave the loop without a body
    assert fewest_errors([LOOP.format("s += x"), LOOP.format("s = s + x")], PY) == 0
    assert fewest_errors([LOOP.format("s += (x")] * 3, PY) == 0  # all broken alike: the model's choice
    assert fewest_errors([LOOP.format(""), LOOP.format("s += x")], None) == 0  # no grammar: nothing to judge
    assert fewest_errors([LOOP.format("")], PY) == 0


FILLS = ("", "# add x", "s += (x", "s += x", "s = s + x", "if x:", "  s += x", "return s\nreturn")


def spliced(fill: str, document: str = LOOP) -> tuple[str, Original, tuple[int, int]]:
    """The document with `fill` in its hole, the document before it (its tree parsed) and the fill's span."""
    at = document.index("{}")
    original = document.replace("{}", "")
    return original[:at] + fill + original[at:], Original(original, parse(original, PY)), (at, at + len(fill))


def test_a_fill_parsed_from_the_document_s_tree_counts_as_a_fresh_parse():
    for fill in FILLS:
        text, original, span = spliced(fill)
        assert syntax_errors(text, PY, original, span) == syntax_errors(text, PY), fill
    texts, spans = zip(*[(t, sp) for t, _, sp in map(spliced, FILLS)])
    _, original, _ = spliced("")
    assert fewest_errors(list(texts), PY, original, list(spans)) == fewest_errors(list(texts), PY) == 3


def test_an_error_far_from_the_fill_does_not_count_against_every_fill():
    # CPython rejects the other function (a `return` at the top level, outside any function), which
    # a fresh compile of the whole file counts for each fill alike; the spliced check compiles the
    # statements around the fill, so the fill that itself breaks its loop still loses.
    document = LOOP + "\n\nx = 1\nreturn x\n"
    good, original, span = spliced("s += x", document)
    assert syntax_errors(good, PY) == 1 and syntax_errors(good, PY, original, span) == 0
    bad, _, bad_span = spliced("# add x", document)
    assert syntax_errors(bad, PY, original, bad_span) == 1
    assert fewest_errors([bad, good], PY, original, [bad_span, span]) == 1


def test_the_cli_prints_the_parsing_fill_and_keeps_the_others_in_order(tmp_path):
    before, after = LOOP.split("{}")
    hole = HoleResult("# add x", "end", 3, 3, alternatives=["s += (x", "s += x", "s = s + x"])
    chosen = parsing_first(hole, before, after, tmp_path / "totals.py")
    assert chosen.text == "s += x" and chosen.alternatives == ["# add x", "s += (x", "s = s + x"]
    assert parsing_first(hole, before, after, tmp_path / "totals.unknown") is hole  # no grammar
    single = HoleResult("# add x", "end", 3, 3)
    assert parsing_first(single, before, after, tmp_path / "totals.py") is single  # one fill: nothing to choose
