"""A multi-line completion where a dedent ends a block (Python; JavaScript and TypeScript)
carries `stop_indent` (the engine stops the fill where shaping would cut it); a single line,
C-like braces and a range edit do not."""

from lsprotocol import types

from dllm_lsp.server.documents import DocumentStore
from dllm_lsp.server.infill import plan_completion, plan_range
from dllm_lsp.server.options import ServerOptions


def plan(text: str, uri: str = "file:///t.py", language_id: str = "python"):
    store = DocumentStore()
    doc = store.open(types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text.replace("█", "")))
    return plan_completion(doc, text.index("█"), ServerOptions(), {})


def test_a_block_body_stops_below_the_cursor_s_indentation():
    p = plan("def count(path):\n    total = 0\n    for line in open(path):\n        █\n    return total\n")
    assert p.ctx.kind in ("multiline", "block") and p.hole.stop_indent == 8


def test_after_a_block_opener_a_line_must_be_deeper_than_the_opener():
    p = plan("class A:\n    def f(self):█\n")
    assert p.ctx.kind == "block" and p.hole.stop_indent == 5


def test_a_javascript_or_typescript_body_stops_at_its_closing_brace_s_dedent():
    # Left of the opener only: the model may write its lines in a smaller unit than the file's.
    js = plan("function f(x) {\n    █\n}\n", uri="file:///t.js", language_id="javascript")
    assert js.ctx.kind != "line" and js.hole.stop_indent == 1
    ts = plan("class A {\n  m(x: number): number {█\n  }\n}\n", uri="file:///t.ts", language_id="typescript")
    assert ts.ctx.kind == "block" and ts.hole.stop_indent == 3
    method = plan("class A {\n    m() {\n        █\n    }\n}\n", uri="file:///t.js", language_id="javascript")
    assert method.hole.stop_indent == 5
    # A blank line inside a body (multiline "always"): no bound in a braces language.
    text = "function f(x) {\n    const y = x;\n    █\n    return y;\n}\n"
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///t.js", language_id="javascript", version=1,
                                                      text=text.replace("█", "")))
    loose = plan_completion(doc, text.index("█"), ServerOptions(multiline="always"), {})
    assert loose.ctx.kind == "multiline" and loose.hole.stop_indent is None


def test_no_stop_for_a_line_c_like_braces_or_a_range_edit():
    line = plan("def f(x):\n    return x +█\n")
    assert line.ctx.kind == "line" and line.hole.stop_indent is None and line.hole.stop == ("\n",)
    # C and C++ put preprocessor lines, labels and access specifiers left of a block's body.
    c = plan("int f(int x) {\n    █\n}\n", uri="file:///t.c", language_id="c")
    assert c.ctx.kind != "line" and c.hole.stop_indent is None
    store = DocumentStore()
    text = "def f(xs):\n    for x in xs:\n        print(x)\n        print(x * 2)\n"
    doc = store.open(types.TextDocumentItem(uri="file:///r.py", language_id="python", version=1, text=text))
    start = text.index("        print(x)")
    _, hole = plan_range(doc, start, text.index("\n", text.index("x * 2")), ServerOptions())
    assert hole.stop_indent is None


def test_an_empty_body_at_column_0_still_stops_at_the_opener_s_level():
    # An editor without auto-indent leaves the cursor at column 0 after `def f():` + Enter:
    # the body's lines must still be deeper than the opener, so a fill that runs on into
    # the next function stops there instead of at max_tokens.
    top = plan("def f(x):\n█\n\ndef g():\n    pass\n")
    assert top.ctx.kind == "block" and top.hole.stop_indent == 1
    method = plan("class A:\n    def f(self):\n█\n    def g(self):\n        pass\n")
    assert method.ctx.kind == "block" and method.hole.stop_indent == 5
    # Past the cursor's own indentation the cursor's column rules, as before.
    assert plan("class A:\n    def f(self):\n            █\n").hole.stop_indent == 12
    # A blank line at column 0 after a statement (the user may be leaving the block): no bound.
    text = "def f(x):\n    y = x\n█\n"
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///t.py", language_id="python", version=1,
                                                      text=text.replace("█", "")))
    loose = plan_completion(doc, text.index("█"), ServerOptions(multiline="always"), {})
    assert loose.ctx.kind == "multiline" and loose.hole.stop_indent is None


def test_every_completion_asks_the_engine_to_stop_a_loop():
    """Shaping cuts a fill that loops (drop_repetition) whatever its kind, so every completion
    asks the engine to end the fill there (Hole.stop_repeats, repeat_stop.py)."""
    for text in ("def f(x):\n    return x +█\n", "def count(path):\n    for line in open(path):\n        █\n",
                 "class A:\n    def f(self):█\n"):
        assert plan(text).hole.stop_repeats is True
    assert plan("function f(x) {\n    █\n}\n", uri="file:///t.js", language_id="javascript").hole.stop_repeats is True


def test_range_edits_and_the_refactor_command_ask_to_stop_a_loop_too():
    """Range edits (fill holes, rewrite a selection) and `dllm-lsp refactor` shape their fills
    with the same drop_repetition: their holes carry stop_repeats as well."""
    from dllm_lsp.refactor.runner import _engine_hole

    text = "def f(xs):\n    for x in xs:\n        print(x)\n        print(x * 2)\n"
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///r.py", language_id="python", version=1, text=text))
    ctx, hole = plan_range(doc, text.index("        print(x)"), text.index("\n", text.index("x * 2")), ServerOptions())
    assert hole.stop_repeats is True
    assert _engine_hole(ctx).stop_repeats is True
