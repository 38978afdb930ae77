"""Best of N where the user asked for the fill: an inline completion with triggerKind Invoked
reaches the engine with `diffusion.invokedCandidates` candidates, one triggered by typing with
one (over real JSON-RPC and the daemon's real HTTP app, a scripted model)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from dllm_lsp.server.infill import request_for
from dllm_lsp.server.options import parse_options
from dllm_engine.protocol import Hole

from .conftest import command, open_doc, pos, start, wait_for
from .scripted_engine import ScriptedDaemon

URI = "file:///tmp/project/totals.py"
TEXT = "def total(xs):\n    s = 0\n    for x in xs:\n        \n    return s\n"


@pytest.fixture
def scripted():
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [("        ", "s += x")]
        yield daemon


def asked_by_editor(scripted):
    """The engine requests made for the editor (not the next line's prefetch, at batch priority)."""
    return [r for r in scripted.engine.infill_requests if r.priority == "interactive"]


async def ask(client, kind):
    return await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=pos(3, 8),
        context=types.InlineCompletionContext(trigger_kind=kind)))


async def test_invoked_inline_completions_ask_for_best_of_n(client, scripted):
    await start(client, engine={"mode": "remote", "url": scripted.url}, debounceMs=0,
                diffusion={"invokedCandidates": 3})
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, URI, TEXT)
    typed = await ask(client, types.InlineCompletionTriggerKind.Automatic)
    assert [i.insert_text for i in typed.items] == ["s += x"]
    assert asked_by_editor(scripted)[-1].params.candidates == 1
    client.text_document_did_change(types.DidChangeTextDocumentParams(  # a fresh snapshot: no cached answer
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=TEXT + "\n")]))
    asked = await ask(client, types.InlineCompletionTriggerKind.Invoked)
    assert [i.insert_text for i in asked.items] == ["s += x"]
    assert asked_by_editor(scripted)[-1].params.candidates == 3


async def test_best_of_n_s_other_fills_come_as_further_items(client, scripted):
    """The engine's other fills (best read first) follow the best as further inline items, each
    shaped as any fill: one that shaping drops or that repeats another is not offered."""
    scripted.engine.alternatives = {"        ": ["s = s + x", "s += x", "s = s + x  ", "s += (x"]}
    await start(client, engine={"mode": "remote", "url": scripted.url}, debounceMs=0,
                diffusion={"invokedCandidates": 4})
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, URI, TEXT)
    asked = await ask(client, types.InlineCompletionTriggerKind.Invoked)
    assert [i.insert_text for i in asked.items] == ["s += x", "s = s + x"], asked.items
    assert all(i.range.start == pos(3, 8) for i in asked.items)
    typed = await ask(client, types.InlineCompletionTriggerKind.Automatic)  # the cache: the best alone
    assert [i.insert_text for i in typed.items] == ["s += x"]


async def test_an_other_fill_the_file_parses_with_comes_first(client, scripted):
    """The best-read fill leaves the loop without a body (a comment alone); another fill gives
    it one: that one is offered first, the model's choices after it. Where shaping drops the
    best-read fill (an empty one), the other stands in instead of nothing."""
    scripted.engine.rules = [("        ", "# add x to s")]
    scripted.engine.alternatives = {"        ": ["# x into s", "s += x"]}
    await start(client, engine={"mode": "remote", "url": scripted.url}, debounceMs=0,
                diffusion={"invokedCandidates": 3})
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, URI, TEXT)
    asked = await ask(client, types.InlineCompletionTriggerKind.Invoked)
    assert [i.insert_text for i in asked.items] == ["s += x", "# add x to s", "# x into s"], asked.items
    scripted.engine.rules = [("        ", "")]
    scripted.engine.alternatives = {"        ": ["s += x"]}
    client.text_document_did_change(types.DidChangeTextDocumentParams(  # a fresh snapshot: no cached answer
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=TEXT + "\n")]))
    asked = await ask(client, types.InlineCompletionTriggerKind.Invoked)
    assert [i.insert_text for i in asked.items] == ["s += x"], asked.items


async def test_regenerate_takes_the_first_fill_that_keeps_the_file_parsing(client, scripted):
    """Regenerate selection is best of N too: a best-read fill that breaks the file gives way to
    the first other fill (best read first) that does not; none that parses, no edit."""
    text = "def f(x):\n    y = x + 1\n    return y\n"
    scripted.engine.rules = [("    y = ", "x * (")]
    scripted.engine.alternatives = {"    y = ": ["x - (", "x * 2", "x - 1"]}
    await start(client, engine={"mode": "remote", "url": scripted.url}, debounceMs=0,
                diffusion={"invokedCandidates": 4})
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, "file:///tmp/project/edit.py", text)
    selection = {"start": {"line": 1, "character": 8}, "end": {"line": 1, "character": 13}}
    result = await command(client, "dllm.regenerateSelection", "file:///tmp/project/edit.py", selection)
    assert result["applied"] is True
    [edit] = client.applied_edits
    assert [e.new_text for change in edit.document_changes for e in change.edits] == ["x * 2"]
    scripted.engine.alternatives = {"    y = ": ["x - ("]}
    result = await command(client, "dllm.regenerateSelection", "file:///tmp/project/edit.py", selection)
    assert result == {"applied": False} and len(client.applied_edits) == 1


def test_the_setting_is_checked_and_many_holes_share_the_fill_budget():
    opts, errors = parse_options({"diffusion": {"invokedCandidates": 9}})
    assert errors and "invokedCandidates" in errors[0] and opts.diffusion.invoked_candidates == 2
    opts, errors = parse_options({"diffusion": {"invokedCandidates": 3}})
    assert not errors
    assert request_for([Hole(prefix="x")], opts).params.candidates == 1
    assert request_for([Hole(prefix="x")], opts, invoked=True).params.candidates == 3
    many = request_for([Hole(prefix="x")] * 100, opts, invoked=True)
    many.validate()  # 100 holes x 3 fills would be over the engine's 256 per request
    assert many.params.candidates == 2


@pytest.mark.slow
async def test_the_default_model_s_other_fills_reach_the_editor(client):
    """The real default model in process: an explicit request at a hole of examples/holes
    (best of 4) answers the best first, then other fills from the engine's own alternatives,
    each distinct and at the cursor."""
    text = "def total(xs):\n    s = 0\n    for x in xs:\n        \n    return s\n"
    await start(client, engine={"model": "default"}, diffusion={"invokedCandidates": 4}, prefetchNextLine=False)
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] in ("ready", "error"), 120,
                   "the default model to load")
    assert client.statuses[-1]["state"] == "ready", client.statuses[-1]
    open_doc(client, URI, text)
    asked = await ask(client, types.InlineCompletionTriggerKind.Invoked)
    last = (await command(client, "dllm.serverStats"))["lastResult"]
    assert last["model"] == "default" and asked.items, last
    fill = last["holes"][0]
    texts = [i.insert_text for i in asked.items]
    assert len(set(texts)) == len(texts) and all(i.range.start == pos(3, 8) for i in asked.items), texts
    assert len(texts) - 1 <= fill["alternatives"] <= 3, (texts, fill)

