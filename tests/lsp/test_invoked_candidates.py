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

