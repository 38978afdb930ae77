"""Next edits in the server, the pure parts: edit history, editable region, filters, params."""

from __future__ import annotations

import pytest

from dllm_lsp.server.next_edit.filters import Replacement, confident, drop_reason
from dllm_lsp.server.next_edit.history import Edit, EditHistory, coalesce, diff
from dllm_lsp.server.next_edit.params import InvalidParams, NextEditParams, parse
from dllm_lsp.server.next_edit.region import editable_region, renamed_uses
from dllm_lsp.syntax.languages import language_named, parse as ts_parse

PY = language_named("python")


def test_diff_and_coalescing_make_a_rename_one_edit():
    assert diff("abc", "abc") is None
    assert diff("def f(w):", "def f(wi):") == Edit(7, "", "i")
    assert diff("aXXb", "ab") == Edit(1, "XX", "")
    history = EditHistory()
    base = text = "def f(w):\n    return w\n"
    for typed in ("wi", "wid", "widt", "width"):
        new = base.replace("f(w)", f"f({typed})")
        history.record("u", text, new)
        text = new
    assert history.recent("u") == [Edit(7, "", "idth")]
    # Typing somewhere else starts a new edit; the text before it is kept for the undo check.
    new = text.replace("return w", "return  w")
    history.record("u", text, new)
    assert len(history.recent("u")) == 2 and history.text_before_last("u") == text


def test_typing_and_taking_it_back_is_no_edit():
    history = EditHistory()
    history.record("u", "x = 1\n", "x = 12\n")
    assert history.record("u", "x = 12\n", "x = 1\n") is None and history.recent("u") == []
    assert coalesce(Edit(4, "", "2"), Edit(9, "", "3")) is None


SOURCE = '''import os


def area(width, height):
    """The area."""
    w = 2
    return w * height


def main():
    print(area(2, 3))
    return 0
'''


def test_region_grows_to_the_enclosing_function_and_to_renamed_uses():
    tree = ts_parse(SOURCE, PY)
    at = SOURCE.index("width")
    region = editable_region(SOURCE, tree, PY, at, at + 5, max_lines=40)
    assert (region.start_line, region.end_line) == (0, 7)  # 3 lines before, the function to its end
    at = SOURCE.index("w = 2")
    region = editable_region(SOURCE, tree, PY, at, at + 1, max_lines=40)
    assert (region.start_line, region.end_line) == (2, 9)
    # A renamed function: its call further down joins the region.
    renamed = SOURCE.replace("def area(", "def surface(")
    tree = ts_parse(renamed, PY)
    at = renamed.index("surface(")
    region = editable_region(renamed, tree, PY, at, at + 7, max_lines=40, renamed={"area"})
    assert region.end_line >= 11 and [renamed[s:e] for s, e in region.uses] == ["area"]
    # The cap wins over both: the call is out of the edit's reach, so the region is the window
    # around the call (the next edit is there; the client offers to jump to it).
    region = editable_region(renamed, tree, PY, at, at + 7, max_lines=5, renamed={"area"})
    call_row = renamed[:renamed.index("area(2")].count("\n")
    assert region.end_line - region.start_line <= 5 and region.start_line <= call_row < region.end_line
    assert region.start_line > renamed[:at].count("\n") and [renamed[s:e] for s, e in region.uses] == ["area"]
    # Nothing left to follow up: the region stays at the edit.
    done = renamed.replace("area(2", "surface(2")
    region = editable_region(done, ts_parse(done, PY), PY, at, at + 7, max_lines=5, renamed={"area"})
    assert region.start_line <= renamed[:at].count("\n") < region.end_line and region.uses == ()


def test_uses_in_strings_and_comments_are_not_identifiers():
    text = 'x = 1\n# x here\ny = "x" + str(x)\n'
    tree = ts_parse(text, PY)
    assert renamed_uses(text, tree, {"x"}, (0, 1)) == [(text.rindex("x"), text.rindex("x") + 1)]
    assert len(renamed_uses(text, None, {"x"}, (0, 1))) == 3  # no grammar: every whole word


def test_without_a_grammar_the_region_is_lines():
    text = "".join(f"line {i}\n" for i in range(100))
    region = editable_region(text, None, None, text.index("line 50"), text.index("line 50") + 4, max_lines=21)
    assert (region.start_line, region.end_line) == (40, 61)


TEXT = "def f(width):\n    return w + 1\n"
LAST = Edit(TEXT.index("width"), "w", "width")
BEFORE = "def f(w):\n    return w + 1\n"
W = TEXT.index("w +")


def reason(*reps, min_confidence=0.3, rejected=()):
    return drop_reason(TEXT, list(reps), LAST, BEFORE, {"w"}, PY, min_confidence, set(rejected))


def test_filters():
    good = Replacement(W, W + 1, "width", 0.8)
    assert reason(good) is None
    assert reason() == "no change"
    assert reason(Replacement(W + 1, W + 2, "  ", 0.9)) == "whitespace only"
    assert reason(Replacement(W, W + 1, "width", 0.1)).startswith("confidence")
    assert reason(Replacement(W, W + 1, "width (", 0.9)) == "does not parse"
    assert reason(Replacement(LAST.offset, LAST.offset + 5, "w", 0.9)) == "undoes the last edit"
    after = LAST.offset + len(LAST.inserted)  # `):` right after the typed name
    assert reason(Replacement(after, after + 2, ", b):", 0.9)) == "undoes the last edit"
    assert reason(Replacement(TEXT.index("1"), TEXT.index("1") + 1, "w", 0.9)) == "puts back a name the last edit removed"
    assert reason(good, rejected=[frozenset({("w", "width")})]) == "rejected before"
    # No grammar: nothing to parse against, the rest still applies.
    assert drop_reason(TEXT, [Replacement(W, W + 1, "width (", 0.9)], LAST, BEFORE, {"w"}, None, 0.3, set()) is None


@pytest.mark.parametrize("raw,field", [
    ({"textDocument": {"uri": "file:///a.py", "version": "2"}, "position": {"line": 0, "character": 0}},
     "textDocument.version"),
    ({"textDocument": {"uri": "file:///a.py", "version": 2}, "position": {"line": -1, "character": 0}},
     "position.line"),
    ({"textDocument": {"uri": "file:///a.py", "version": 2}, "position": {"line": 1.0, "character": 0}},
     "position.line"),
    ({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}}, "textDocument.version"),
    ({"position": {"line": 0, "character": 0}}, "textDocument"),
    (None, "params"),
])
def test_params_are_checked_strictly(raw, field):
    with pytest.raises(InvalidParams, match=field):
        parse(NextEditParams, raw)
    ok = parse(NextEditParams, {"textDocument": {"uri": "file:///a.py", "version": 2, "extra": 1},
                                "position": {"line": 3, "character": 4}})
    assert ok.position.line == 3


def test_a_long_file_is_sent_as_a_window_around_the_region():
    from dllm_engine.protocol import DiffusionParams
    from dllm_lsp.server.next_edit.pipeline import plan_request

    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(2000))
    at = body.index("def f1000(x)") + len("def f1000(")
    text = body[:at] + "value" + body[at + 1:]  # `x` -> `value` in f1000
    request, base, last, removed = plan_request(text, ts_parse(text, PY), PY, [Edit(at, "x", "value")], None, 60,
                                                DiffusionParams())
    request.validate()  # offsets, region and the newest edit agree with the window
    assert len(request.document) < 8000 < len(text) and removed == {"x"}
    assert request.document[request.edits[-1].offset:].startswith("value")
    lines = request.document.splitlines(keepends=True)
    region = "".join(lines[request.region_start_line:request.region_end_line])
    assert "def f1000(value):\n    return x + 1000\n" in region
    assert text[base:base + len(request.document)] == request.document


def test_a_function_renamed_far_from_its_calls_gets_the_region_around_the_nearest_call():
    """The call is out of the edit's window (thousands of lines away): the request's region is
    around the call, its window still holds the edit (the engine seeds the stale use from it)."""
    from dllm_engine.protocol import DiffusionParams
    from dllm_lsp.server.next_edit.pipeline import plan_request

    filler = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(400))
    body = "def area(w, h):\n    return w * h\n\n\n" + filler + "def main():\n    print(area(2, 3))\n"
    at = body.index("area")
    text = body[:at] + "surface" + body[at + 4:]
    request, base, last, removed = plan_request(text, ts_parse(text, PY), PY, [Edit(at, "area", "surface")], None, 60,
                                                DiffusionParams())
    request.validate()
    lines = request.document.splitlines(keepends=True)
    region = "".join(lines[request.region_start_line:request.region_end_line])
    assert "print(area(2, 3))" in region and "def surface" not in region
    assert request.document[request.edits[-1].offset:].startswith("surface") and removed == {"area"}
    assert [request.document[s.start:s.end] for s in request.spans] == ["area"] and request.spans_are_uses


def test_doubtful_spans_are_left_out_and_the_rest_stands():
    sure, doubtful = Replacement(W, W + 1, "width", 0.8), Replacement(0, 3, "len", 0.05)
    assert confident([sure, doubtful], 0.3) == [sure]
    assert confident([doubtful], 0.3) == []


SCOPED = '''def area(width, height):
    """area(2, 3) is 6."""
    return width * height


def volume(width, depth):
    return area(width, 2) * depth


print(area(2, 3))
'''


def test_a_rename_reaches_its_scope_and_calls_are_named_by_the_tree():
    from dllm_lsp.server.next_edit.region import call_arguments, rename_scope

    tree = ts_parse(SCOPED, PY)
    at = SCOPED.index("width")  # a parameter of `area`: its uses are `area`'s
    lo, hi = rename_scope(tree, PY, SCOPED, at, at + 5, {"width"})
    assert SCOPED[lo:hi].startswith("def area") and "volume" not in SCOPED[lo:hi]
    region = editable_region(SCOPED, tree, PY, at, at + 5, max_lines=40, renamed={"width"})
    assert [s for s, _ in region.uses] == [SCOPED.index("width *")] and region.parsed
    at = SCOPED.index("area")  # the function's own name: its calls anywhere
    assert rename_scope(tree, PY, SCOPED, at, at + 4) == (0, len(SCOPED))
    assert rename_scope(None, None, SCOPED, at, at + 4) == (0, len(SCOPED))
    # The calls' argument lists, not the docstring's example call.
    args = call_arguments(SCOPED, tree, {"area"}, (0, 0))
    assert [SCOPED[a:b] for a, b in args] == ["width, 2", "2, 3"]


def test_the_request_says_its_spans_are_every_use():
    from dllm_lsp.server.next_edit.history import Edit as HEdit
    from dllm_lsp.server.next_edit.pipeline import plan_request

    text = SCOPED.replace("def area(width, height)", "def area(width, height, unit)")
    tree = ts_parse(text, PY)
    at = text.index(", unit")
    request, base, last, removed = plan_request(text, tree, PY, [HEdit(at, "", ", unit")], None, 40, None)
    assert request.spans_are_uses and base == 0
    assert [text[s.start:s.end] for s in request.spans] == ["width, 2", "2, 3"]
    request, *_ = plan_request(text, None, None, [HEdit(at, "", ", unit")], None, 40, None)
    assert not request.spans_are_uses  # no tree: the engine cannot tell code from a docstring


def test_a_function_renamed_at_a_call_reaches_the_file_and_a_local_its_function():
    from dllm_lsp.server.next_edit.region import rename_scope

    text = ("def helper(x):\n    return x\n\n\ndef one(n):\n    total = helper(n)\n    return total + helper(n)\n\n\n"
            "def two(total):\n    return helper(total)\n")
    tree = ts_parse(text, PY)
    call = text.index("helper(n)")  # `helper` renamed at a call: its calls in `two` follow
    assert rename_scope(tree, PY, text, call, call + 6, {"helper", "helper2"}) == (0, len(text))
    use = text.index("total + ")  # a local of `one`, renamed at a use after its assignment
    lo, hi = rename_scope(tree, PY, text, use, use + 5, {"total", "sum_"})
    assert text[lo:hi].startswith("def one") and "def two" not in text[lo:hi]
    # The new name bound where the old was (the definition renamed first) tells the same scope.
    renamed = text.replace("def one(n)", "def one(count)")
    at = renamed.index("helper(n)") + 7
    lo, hi = rename_scope(ts_parse(renamed, PY), PY, renamed, at, at + 1, {"n", "count"})
    assert renamed[lo:hi].startswith("def one")


def test_a_call_made_to_another_function_renames_nothing():
    # `helper` is still defined: the edit called `other` at one place, the other call stays.
    text = "def helper(x):\n    return x\n\n\ndef other(x):\n    return -x\n\n\ny = other(1) + helper(2)\n"
    tree = ts_parse(text, PY)
    at = text.index("other(1)")
    region = editable_region(text, tree, PY, at, at + 5, max_lines=40, renamed={"helper"}, written={"other"})
    assert region.uses == () and region.parsed
    gone = text.replace("def helper(x)", "def helper2(x)")  # renamed at its `def`: its calls are stale
    at = gone.index("helper2")
    region = editable_region(gone, ts_parse(gone, PY), PY, at, at + 7, max_lines=40, renamed={"helper"},
                             written={"helper2"})
    assert [gone[a:b] for a, b in region.uses] == ["helper"]
