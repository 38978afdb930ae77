"""The unsure gate (`lineMinTokenProb`, `multilineMinTokenProb`): a typing-triggered suggestion
asks the engine to end the fill at a token it is unsure of (Hole.min_token_prob); such a fill
shows nothing on a single line and its complete lines before that token on several; a
suggestion the user asked for and a zero setting ask nothing.
Against the planner, over real JSON-RPC and the daemon's real HTTP app (a scripted model), and
through a real server on the small model. The engine's rule on real models is tested in
tests/engine/test_unsure_stop.py and tests/bases/test_unsure_stop_default.py."""

from __future__ import annotations

import pytest
from lsprotocol import types

from dllm_lsp.server.documents import DocumentStore
from dllm_engine.protocol import HoleResult
from dllm_lsp.server.infill import plan_completion, shape_fill, unsure_lines
from dllm_lsp.server.options import parse_options

from .conftest import command, inline, open_doc, pos, start, wait_for
from .scripted_engine import ScriptedDaemon

MID_LINE = "def total(xs):\n    s = sum(█\n    return s\n"
EMPTY_BODY = "def total(xs):\n    █\n\n\ndef g():\n    pass\n"


def plan(text: str, settings: dict | None = None, invoked: bool = False):
    options, errors = parse_options(settings or {})
    assert not errors
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///t.py", language_id="python", version=1,
                                                      text=text.replace("█", "")))
    return plan_completion(doc, text.index("█"), options, {}, invoked=invoked)


def test_only_a_typed_single_line_suggestion_asks_for_the_gate():
    line = plan(MID_LINE)
    assert line.ctx.kind == "line" and line.hole.min_token_prob == 0.15
    assert plan(MID_LINE, {"lineMinTokenProb": 0.3}).hole.min_token_prob == 0.3
    assert plan(MID_LINE, {"lineMinTokenProb": 0}).hole.min_token_prob is None
    assert plan(MID_LINE, invoked=True).hole.min_token_prob is None  # the user asked: always shown
    assert plan(MID_LINE, {"multilineMinTokenProb": 0}).hole.min_token_prob == 0.15


def test_a_typed_multiline_suggestion_asks_for_its_own_floor():
    body = plan(EMPTY_BODY)
    assert body.ctx.kind != "line" and body.hole.min_token_prob == 0.15
    assert plan(EMPTY_BODY, {"multilineMinTokenProb": 0.4, "lineMinTokenProb": 0}).hole.min_token_prob == 0.4
    assert plan(EMPTY_BODY, {"multilineMinTokenProb": 0}).hole.min_token_prob is None
    assert plan(EMPTY_BODY, invoked=True).hole.min_token_prob is None


def test_an_unsure_multiline_fill_keeps_its_complete_lines():
    body = plan(EMPTY_BODY)
    # The lines finished before the unsure token, less the block openers whose bodies it did not reach.
    assert unsure_lines(body, "s = 0\n    for x in xs:\n        s +") == "s = 0\n"
    assert unsure_lines(body, "s = 0\n    if xs:\n        for x in xs:\n            s") == "s = 0\n"
    assert unsure_lines(body, "s = 0\n    for x in xs:\n        s += x\n    if s") == (
        "s = 0\n    for x in xs:\n        s += x\n")
    assert unsure_lines(body, "s = 0\n") == "s = 0\n"
    assert unsure_lines(body, "s = sum(") == "" and unsure_lines(body, "\n    \n") == ""
    assert unsure_lines(body, "for x in xs:\n        s") == ""
    assert unsure_lines(plan(MID_LINE), "xs)\n") == ""  # a single line's fill: nothing
    fill = HoleResult("s = 0\n    for x in xs:\n        s +", "unsure", 9, 9)
    assert shape_fill(body, fill).text == "s = 0"  # shaped as any fill
    assert shape_fill(body, HoleResult("s = 0\n    return s\n    x", "unsure", 9, 9)).text == "s = 0\n    return s"
    assert shape_fill(body, HoleResult("s = 0", "unsure", 3, 3)) is None


@pytest.mark.parametrize("key", ["lineMinTokenProb", "multilineMinTokenProb"])
def test_a_bad_value_keeps_the_default_and_says_why(key):
    for bad in (1, 1.0, -0.1, "high", True, None):
        options, errors = parse_options({key: bad})
        assert (options.line_min_token_prob, options.multiline_min_token_prob) == (0.15, 0.15), (bad, errors)
        assert errors and key in errors[0], (bad, errors)


async def test_an_unsure_fill_is_not_shown_and_an_asked_one_is(client):
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [("sum(", "xs) + offset_of(xs)")]
        daemon.engine.prob = 0.1  # every token unsure
        await start(client, engine={"mode": "remote", "url": daemon.url}, debounceMs=0)
        await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
        uri = "file:///tmp/unsure.py"
        text = MID_LINE.replace("█", "")
        open_doc(client, uri, text)
        assert not (await inline(client, uri, 1, 12)).items
        asked = [r for r in daemon.engine.infill_requests if r.priority == "interactive"]
        assert asked[-1].holes[0].min_token_prob == 0.15
        stats = await command(client, "dllm.serverStats")
        assert stats["scheduler"]["unsure_hidden"] == 1 and stats["engineAnswerMs"][-1]["unsure"] is True
        client.text_document_did_change(types.DidChangeTextDocumentParams(  # a fresh snapshot: no cached answer
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text + "\n")]))
        invoked = await client.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=pos(1, 12),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
        assert [i.insert_text for i in invoked.items] == ["xs) + offset_of(xs)"]
        asked = [r for r in daemon.engine.infill_requests if r.priority == "interactive"]
        assert asked[-1].holes[0].min_token_prob is None
        stats = await command(client, "dllm.serverStats")
        assert stats["scheduler"]["unsure_hidden"] == 1


async def test_an_unsure_multiline_fill_shows_the_lines_before_the_unsure_token(client):
    with ScriptedDaemon() as daemon:
        # The scripted engine ends an unsure fill half-way: after "    for x in xs:\n" and part of the next.
        daemon.engine.rules = [("def total(xs):\n    ", "s = 0\n    for x in xs:\n        s += x\n    return s")]
        daemon.engine.prob = 0.1
        await start(client, engine={"mode": "remote", "url": daemon.url}, debounceMs=0)
        await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
        uri = "file:///tmp/unsure_body.py"
        open_doc(client, uri, EMPTY_BODY.replace("█", ""))
        shown = (await inline(client, uri, 1, 4)).items
        assert [i.insert_text for i in shown] == ["s = 0"], shown  # "for x in xs:" opened a block it never filled
        asked = [r for r in daemon.engine.infill_requests if r.priority == "interactive"]
        assert asked[-1].holes[0].min_token_prob == 0.15
        stats = await command(client, "dllm.serverStats")
        assert stats["scheduler"]["unsure_cut"] == 1 and stats["scheduler"]["unsure_hidden"] == 0


@pytest.mark.slow
async def test_the_real_server_hides_what_the_small_model_is_unsure_of(client):
    """The small model in process: at 0.999 its fill ends unsure (a from-scratch model is sure of
    little) and nothing is shown; at 0 the same place's fill runs to its end."""
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), initialization_options={"debounceMs": 0, "lineMinTokenProb": 0.999}))
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] in ("ready", "error"),
                   timeout=60, what="the model to load")
    assert client.statuses[-1]["state"] == "ready", client.statuses[-1]
    uri = "file:///tmp/unsure_real.py"
    text = MID_LINE.replace("█", "")
    open_doc(client, uri, text)
    assert not (await inline(client, uri, 1, 12)).items
    stats = await command(client, "dllm.serverStats")
    assert stats["lastResult"]["model"] == "small" and stats["lastResult"]["holes"][0]["finishReason"] == "unsure"
    assert stats["scheduler"]["unsure_hidden"] == 1
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dllm": {"debounceMs": 0, "lineMinTokenProb": 0}}))
    await command(client, "dllm.engineStatus")  # the settings are applied before the next request
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text + "\n")]))
    await inline(client, uri, 1, 12)
    stats = await command(client, "dllm.serverStats")
    assert stats["lastResult"]["holes"][0]["finishReason"] != "unsure" and stats["scheduler"]["unsure_hidden"] == 1
