"""A plan is a snapshot: the document's tree it holds still describes the plan's text after the
user types on while the engine fills (the store edits its tree in place, keystroke by
keystroke), so shaping and best of N's parse choice, which parse the filled text from the
plan's tree, never reuse nodes of a text they are not reading."""

from __future__ import annotations

from lsprotocol import types

from dllm_lsp.server.documents import DocumentStore
from dllm_lsp.server.infill import plan_completion, shape, with_alternatives
from dllm_lsp.server.options import parse_options
from dllm_engine.protocol import HoleResult

TEXT = "def total(xs):\n    s = 0\n    for x in xs:\n        \n    return s\n"
AT = TEXT.index("        \n") + 8
URI = "file:///t.py"


def keystroke(store: DocumentStore, version: int, line: int, character: int, text: str) -> None:
    at = types.Position(line=line, character=character)
    store.change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=text)]),
        "utf-16")


def test_the_plan_s_tree_still_describes_its_text_after_the_user_types_on():
    options, _ = parse_options({})
    store = DocumentStore()
    doc = store.open(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=TEXT))
    plan = plan_completion(doc, AT, options, {}, invoked=True)
    assert plan is not None and plan.tree.root_node.end_byte == len(TEXT.encode())
    # The user types a long comment at the top while the engine fills the planned hole.
    keystroke(store, 2, 0, 0, "# a comment typed while the engine was busy\n")
    assert doc.text != plan.text
    assert plan.tree.root_node.end_byte == len(plan.text.encode())
    assert not plan.tree.root_node.has_error
    # What the plan's tree serves still matches a plan made on the text as it was.
    fresh = plan_completion(store.open(types.TextDocumentItem(uri="file:///u.py", language_id="python", version=1,
                                                              text=TEXT)), AT, options, {}, invoked=True)
    result = HoleResult(text="s += (x", tokens=4, passes=2, finish_reason="stop", alternatives=["s += x"])
    assert with_alternatives(plan, shape(plan, result.text), result) == with_alternatives(fresh, shape(fresh, result.text), result)
