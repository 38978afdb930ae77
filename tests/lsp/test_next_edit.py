"""Next edits over the protocol: didChange -> dllm/nextEdit, inline items, accept / reject, stale
versions, bad params; against the daemon's real app over a scripted engine, and the real small model."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types

from .conftest import inline, open_doc, pos, start, wait_for
from .scripted_engine import ScriptedDaemon

URI = "file:///tmp/project/shapes.py"
TEXT = "def area(w, height):\n    return w * height\n\n\nprint(area(2, 3))\n"


@pytest.fixture
def scripted():
    with ScriptedDaemon() as daemon:
        yield daemon


def rename_w(client, version: int = 2) -> None:
    """`w` -> `width` at the definition, as an editor sends it (one ranged change)."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(0, 9), end=pos(0, 10)), text="width")]))


async def next_edit(client, version: int, line: int = 0, character: int = 14) -> Any:
    return await client.protocol.send_request_async("dllm/nextEdit", {
        "textDocument": {"uri": URI, "version": version}, "position": {"line": line, "character": character}})


def as_dicts(result: Any) -> list[dict]:
    def plain(v):
        if hasattr(v, "_asdict"):
            return {k: plain(x) for k, x in v._asdict().items()}
        return [plain(x) for x in v] if isinstance(v, (list, tuple)) else v
    return plain(result)


async def begin(client, url: str, **next_edit: Any) -> None:
    await start(client, engine={"mode": "remote", "url": url}, inlineCompletion=True,
                nextEdit={"enabled": True, "debounceMs": 0, **next_edit})
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, URI, TEXT)


async def test_a_rename_is_followed_to_its_use(client, scripted):
    scripted.engine.rules = [("return ", "width")]
    await begin(client, scripted.url)
    rename_w(client)
    edits = as_dicts(await next_edit(client, 2))
    assert edits == [{"range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 12}},
                      "newText": "width", "confidence": 0.9}]
    [req] = scripted.engine.next_edit_requests
    assert (req.edits[-1].offset, req.edits[-1].removed, req.edits[-1].inserted) == (10, "", "idth")  # `w` + `idth`
    assert (req.region_start_line, req.region_end_line) == (0, 4)  # the function and 3 lines after the edit
    # The inline completion at the use's line shows it as an item whose range covers `w`.
    result = await inline(client, URI, 1, 4)
    [item] = result.items
    assert item.insert_text == "width" and item.range == types.Range(start=pos(1, 11), end=pos(1, 12))
    # Asking for an older version gets nothing, never a stale edit.
    assert as_dicts(await next_edit(client, 1)) == []


async def test_rejected_proposals_are_not_proposed_again(client, scripted):
    scripted.engine.rules = [("return ", "width")]
    await begin(client, scripted.url)
    rename_w(client)
    assert len(as_dicts(await next_edit(client, 2))) == 1
    client.protocol.notify("dllm/rejectEdit", {"textDocument": {"uri": URI, "version": 2}})
    assert as_dicts(await next_edit(client, 2)) == []  # computed again, dropped as rejected
    assert len(scripted.engine.next_edit_requests) == 2
    client.protocol.notify("dllm/acceptEdit", {"textDocument": {"uri": URI, "version": "two"}})  # ignored, logged


async def test_an_added_parameter_reaches_the_call_and_a_fill_that_does_not_parse_is_dropped(client, scripted):
    scripted.engine.rules = [("area(", "2, 3, 1")]
    await begin(client, scripted.url)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(0, 18), end=pos(0, 18)), text=", unit")]))
    assert as_dicts(await next_edit(client, 2)) == [{
        "range": {"start": {"line": 4, "character": 11}, "end": {"line": 4, "character": 15}},
        "newText": "2, 3, 1", "confidence": 0.9}]
    scripted.engine.rules = [("area(", "2, 3, (")]  # follows the edit (an item added) but does not parse
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=3),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(0, 24), end=pos(0, 24)), text="s")]))  # `units`
    assert as_dicts(await next_edit(client, 3)) == []


async def test_low_confidence_and_bad_params(client, scripted):
    await begin(client, scripted.url)
    with pytest.raises(Exception, match="textDocument.version"):
        await client.protocol.send_request_async("dllm/nextEdit", {
            "textDocument": {"uri": URI, "version": "2"}, "position": {"line": 0, "character": 0}})
    scripted.engine.rules, scripted.engine.prob = [("return ", "width")], 0.05  # under minConfidence 0.15
    rename_w(client)
    assert as_dicts(await next_edit(client, 2)) == []


async def test_disabled_by_default(client, scripted):
    scripted.engine.rules = [("return ", "width")]
    await start(client, engine={"mode": "remote", "url": scripted.url})
    open_doc(client, URI, TEXT)
    rename_w(client)
    assert as_dicts(await next_edit(client, 2)) == []
    assert scripted.engine.next_edit_requests == []


async def test_real_small_model_answers_in_shape(client):
    """In process, the small model: whatever it proposes is well-formed; a plain-text file and
    a file without edits get answers too."""
    await start(client, nextEdit={"enabled": True, "debounceMs": 0, "minConfidence": 0.0})
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 120, "engine ready")
    open_doc(client, URI, TEXT)
    rename_w(client)
    for edit in as_dicts(await next_edit(client, 2)):
        assert set(edit) == {"range", "newText", "confidence"} and 0.0 <= edit["confidence"] <= 1.0
        assert edit["range"]["start"]["line"] >= 1  # never the line the user just edited
    txt = "file:///tmp/project/notes.txt"
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=txt, language_id="plaintext", version=1, text="alpha beta\n" * 50)))
    result = await client.protocol.send_request_async("dllm/nextEdit", {
        "textDocument": {"uri": txt, "version": 1}, "position": {"line": 10, "character": 2}})
    assert isinstance(result, list)
