"""Best of N where the user asked for the fill: an inline completion with triggerKind Invoked
reaches the engine with `diffusion.invokedCandidates` candidates, one triggered by typing with
one (over real JSON-RPC and the daemon's real HTTP app, a scripted model)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from dllm_lsp.server.infill import request_for
from dllm_lsp.server.options import parse_options
from dllm_engine.protocol import Hole

from .conftest import open_doc, pos, start, wait_for
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
