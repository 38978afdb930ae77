"""after_enter (syntax/after_accept.py): the document and cursor after a suggestion is
accepted and Enter pressed, with the editor's auto-indent; and DocumentTree.edited, the
tree of that document without touching the real one."""

from __future__ import annotations

from dllm_lsp.syntax.after_accept import after_enter
from dllm_lsp.syntax.document_tree import DocumentTree
from dllm_lsp.syntax.languages import language_for, parse

PY = language_for("x.py", "python")
JS = language_for("x.js", "javascript")


def accepted(marked: str, inserted: str, language=PY, replaced: int = 0) -> str | None:
    """The new document with `|` at the cursor, or None; `█` marks where `inserted` goes."""
    offset = marked.index("█")
    text = marked.replace("█", "")
    edit = after_enter(text, offset, inserted, offset + replaced, language)
    if edit is None:
        return None
    new = text[:edit.start] + edit.text + text[edit.end:]
    return new[:edit.cursor] + "|" + new[edit.cursor:]


def test_the_next_line_keeps_the_line_s_indentation():
    assert accepted("def f(x):\n    y = █\n    return y\n", "x + 1") == \
        "def f(x):\n    y = x + 1\n    |\n    return y\n"


def test_one_unit_deeper_after_a_block_opener():
    assert accepted("def f(x):\n    if x█\n", ":") == "def f(x):\n    if x:\n        |\n"
    # The unit is the document's: two spaces here.
    assert accepted("def f(x):\n  y = 1\n  for v in x█\n", ":") == "def f(x):\n  y = 1\n  for v in x:\n    |\n"
    js = "function f(x) {\n    let y = 1;\n    █\n}\n"
    assert accepted(js, "if (x) {", JS) == "function f(x) {\n    let y = 1;\n    if (x) {\n        |\n}\n"
    assert accepted(js, "y += x;", JS) == "function f(x) {\n    let y = 1;\n    y += x;\n    |\n}\n"


def test_one_unit_out_after_a_python_statement_that_ends_its_block():
    text = "def f(x):\n    for v in x:\n        if v:\n            █\n"
    assert accepted(text, "return v") == "def f(x):\n    for v in x:\n        if v:\n            return v\n        |\n"
    assert accepted(text, "returned = v") == \
        "def f(x):\n    for v in x:\n        if v:\n            returned = v\n            |\n"  # a name, not the keyword
    assert accepted("def f():\n█\n", "pass") == "def f():\npass\n|\n"  # never below column 0


def test_a_multi_line_suggestion_indents_after_its_last_line():
    assert accepted("def f(x):\n    █\n", "if x:\n        return 1") == "def f(x):\n    if x:\n        return 1\n    |\n"


def test_closers_the_suggestion_replaces_and_text_left_on_the_line():
    assert accepted("y = g(█)\n", "x)", replaced=1) == "y = g(x)\n|\n"
    assert accepted("y = g(█) + 2\n", "x") is None  # Enter there would split the line
    assert accepted("y = █\n", "  ") is None  # nothing to accept
    assert accepted("y = █", "1") == "y = 1\n|"  # at the end of the file


def test_crlf_documents_get_crlf():
    assert accepted("a = 1\r\nb█\r\nc = 3\r\n", " = 2") == "a = 1\r\nb = 2\r\n|\r\nc = 3\r\n"


def test_unknown_languages_indent_after_colon_or_brace():
    assert accepted("x {\n  a█\n", " {", None) == "x {\n  a {\n    |\n"  # the document steps by 2


def test_an_edited_tree_equals_a_fresh_parse_and_leaves_the_original_alone():
    text = "def f(x):\n    if x:\n        \n    return 1\n"
    doc = DocumentTree(text, PY)
    before = str(doc.tree.root_node)
    at = text.index("        \n") + 8
    ahead = doc.edited(at, at, "y = 2\n        ")
    assert ahead.text == text[:at] + "y = 2\n        " + text[at:]
    assert str(ahead.tree.root_node) == str(parse(ahead.text, PY).root_node)
    assert doc.text == text and str(doc.tree.root_node) == before
    assert DocumentTree("x", None).edited(1, 1, "y").text == "xy"
