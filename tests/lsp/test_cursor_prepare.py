"""`dllm/prepareCompletion` (server/cursor_prepare.py) over real JSON-RPC: the cursor rests at a
place and the engine is asked to encode the context a completion there will carry.

With the daemon's real HTTP app over a scripted model: the prepared windows are the ones the
request there carries; a request, a newer place and the setting stop or skip it; bad params and
stale versions are ignored without an answer and cost the server nothing. With the real small
model in process: the first keystroke's request at the prepared place finds its context cached."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from .conftest import command, inline, open_doc, pos, start, wait_for
from .scripted_engine import ScriptedDaemon

URI = "file:///tmp/project/totals.py"
TEXT = "def total(xs):\n    s = 0\n    for x in xs:\n        \n    return s\n"
METHOD = "dllm/prepareCompletion"


@pytest.fixture
def scripted():
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [("        ", "s += x")]
        yield daemon


def rest_at(client, line: int, character: int, version: int = 1, uri: str = URI) -> None:
    client.protocol.notify(METHOD, {"textDocument": {"uri": uri, "version": version},
                                    "position": {"line": line, "character": character}})


async def prepare_stats(client) -> dict:
    return (await command(client, "dllm.serverStats"))["cursorPrepare"]


async def ready(client, scripted, **settings) -> None:
    await start(client, engine={"mode": "remote", "url": scripted.url}, debounceMs=0, prefetchNextLine=False,
                **settings)
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, URI, TEXT)


async def test_the_prepared_context_is_the_one_the_request_there_carries(client, scripted):
    await ready(client, scripted)
    rest_at(client, 3, 8)
    await wait_for(lambda: scripted.engine.prepare_requests, 10, "the engine's prepare request")
    stats = await prepare_stats(client)
    while stats["complete"] < 1:
        await asyncio.sleep(0.02)
        stats = await prepare_stats(client)
    assert stats["started"] == 1 and stats["tokensEncoded"] > 0
    assert [i.insert_text for i in (await inline(client, URI, 3, 8)).items] == ["s += x"]
    prepared = scripted.engine.prepare_requests[0]
    asked = [r for r in scripted.engine.infill_requests if r.holes[0].max_tokens > 1][0].holes[0]
    assert (prepared.prefix, prepared.suffix) == (asked.prefix, asked.suffix)


async def test_a_place_with_code_after_it_is_prepared_too(client, scripted):
    # Mid-line no completion belongs until the user types; the context is the same either way.
    await ready(client, scripted)
    rest_at(client, 1, 6)  # `    s |= 0`
    await wait_for(lambda: scripted.engine.prepare_requests, 10, "the engine's prepare request")
    prepared = scripted.engine.prepare_requests[0]
    assert prepared.prefix.endswith("    s ") and prepared.suffix.startswith("= 0\n")


async def test_a_request_stops_a_running_prepare(client, scripted):
    scripted.engine.prepare_delay = 30.0
    await ready(client, scripted)
    rest_at(client, 3, 8)
    await wait_for(lambda: scripted.engine.prepare_requests, 10, "the engine's prepare request")
    assert [i.insert_text for i in (await inline(client, URI, 3, 8)).items] == ["s += x"]
    await wait_for(lambda: scripted.engine.prepares_stopped == 1, 10, "the daemon to stop the prepare")
    assert (await prepare_stats(client))["stopped"] == 1


async def test_a_newer_place_stops_the_older_one(client, scripted):
    scripted.engine.prepare_delay = 30.0
    await ready(client, scripted)
    rest_at(client, 3, 8)
    await wait_for(lambda: scripted.engine.prepare_requests, 10, "the first prepare")
    rest_at(client, 1, 9)
    await wait_for(lambda: len(scripted.engine.prepare_requests) == 2, 10, "the second prepare")
    await wait_for(lambda: scripted.engine.prepares_stopped >= 1, 10, "the daemon to stop the first")
    assert scripted.engine.prepare_requests[1].prefix.endswith("s = 0")


async def test_bad_params_stale_versions_and_unknown_documents_are_ignored(client, scripted):
    await ready(client, scripted)
    client.protocol.notify(METHOD, {"textDocument": {"uri": URI, "version": "1"}, "position": {"line": 3, "character": 8}})
    client.protocol.notify(METHOD, {"textDocument": {"uri": URI, "version": 1}, "position": {"line": -1, "character": 0}})
    client.protocol.notify(METHOD, {"position": {"line": 3, "character": 8}})
    client.protocol.notify(METHOD, None)
    rest_at(client, 3, 8, version=7)  # not the open version
    rest_at(client, 3, 8, uri="file:///tmp/project/closed.py")
    rest_at(client, 99, 0)  # past the end of the document
    stats = await prepare_stats(client)
    assert stats["invalid"] == 4 and stats["skipped"] == 3 and stats["started"] == 0, stats
    assert not scripted.engine.prepare_requests
    # The server still answers, once per request.
    assert [i.insert_text for i in (await inline(client, URI, 3, 8)).items] == ["s += x"]


async def test_the_setting_turns_it_off(client, scripted):
    await ready(client, scripted, prepareAtCursor=False)
    rest_at(client, 3, 8)
    await inline(client, URI, 3, 8)  # a round trip after the notification
    assert (await prepare_stats(client))["started"] == 0 and not scripted.engine.prepare_requests


async def test_an_openai_endpoint_is_never_asked(client, fake):
    await start(client, url=fake.url)
    open_doc(client, URI, TEXT)
    rest_at(client, 3, 8)
    await inline(client, URI, 3, 8)
    assert (await prepare_stats(client))["started"] == 0


@pytest.mark.slow
async def test_the_first_keystroke_at_a_prepared_place_finds_its_context_cached(client):
    """The real small model in process: rest, wait for the prepare, type; the request encodes
    only the end of the prefix the keystroke changed."""
    await start(client, debounceMs=0, prefetchNextLine=False)
    text = ("import os\n\n\ndef scale(xs, k):\n    out = []\n    for x in xs:\n        out.append(x * k)\n"
            "    return out\n\n\ndef shift(xs, d):\n    out = []\n    for x in xs:\n        \n    return out\n")
    open_doc(client, URI, text)
    rest_at(client, 13, 8)  # while the model loads: prepared once it is in
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] in ("ready", "error"),
                   timeout=60, what="the model to load")
    assert client.statuses[-1]["state"] == "ready", client.statuses[-1]
    stats = await prepare_stats(client)
    for _ in range(600):
        if stats["complete"] + stats["stopped"] >= 1:
            break
        await asyncio.sleep(0.05)
        stats = await prepare_stats(client)
    assert stats["complete"] == 1 and stats["tokensEncoded"] > 50, stats
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=13, character=8), end=types.Position(line=13, character=8)),
            text="o")]))
    await inline(client, URI, 13, 9)
    answer = (await command(client, "dllm.serverStats"))["engineAnswerMs"][-1]
    assert answer["contextTokens"] - answer["cachedTokens"] <= 3, answer


NEXT_PLACE = "s += x\n        "  # the prefix's end after taking line 3's suggestion and Enter


async def shown_while_prefetching(client, scripted, seconds: float) -> None:
    """Line 3's suggestion shown, the next line's prefetch filling (for `seconds`)."""
    scripted.engine.rules = [(NEXT_PLACE, "print(s)"), ("        ", "s += x")]
    scripted.engine.delays = {NEXT_PLACE: seconds}
    await start(client, engine={"mode": "remote", "url": scripted.url}, debounceMs=0)
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, URI, TEXT)
    await inline(client, URI, 3, 8)
    await wait_for(lambda: any(r.priority == "batch" and r.holes[0].max_tokens > 1
                               for r in scripted.engine.infill_requests), 10, "the prefetch")


async def accepted_while_prefetching(client, scripted) -> None:
    """Line 3's suggestion shown, the next line's prefetch filling (1.5 s), the suggestion taken."""
    await shown_while_prefetching(client, scripted, 1.5)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(3, 8), end=pos(3, 8)), text="s += x")]))


async def test_a_move_elsewhere_cancels_the_next_line_s_prefetch(client, scripted):
    await shown_while_prefetching(client, scripted, 30.0)  # the prefetch would hold the engine for 30 s
    rest_at(client, 1, 9)  # the user clicks elsewhere instead of taking the suggestion
    await wait_for(lambda: scripted.engine.cancelled_requests, 10, "the daemon to cancel the prefetch")
    assert scripted.engine.cancelled_requests[0].priority == "batch"
    assert (await command(client, "dllm.serverStats"))["prefetch"]["cancelled"] == 1
    await wait_for(lambda: scripted.engine.prepare_requests, 10, "the prepare")


async def test_a_rest_at_the_end_of_the_accepted_suggestion_leaves_the_prefetch_running(client, scripted):
    """Neovim: Tab, Esc (the cursor rests at the accepted line's end), `o`: the line `o` opens is
    the one Enter makes, so the prefetch of it must survive the rest."""
    await accepted_while_prefetching(client, scripted)
    rest_at(client, 3, 14, version=2)
    rest_at(client, 3, 13, version=2)  # one character short of it: not that place (prepared, cancels)
    await wait_for(lambda: scripted.engine.prepare_requests, 10, "the prepare one short")
    stats = await command(client, "dllm.serverStats")
    assert stats["cursorPrepare"]["prefetching"] == 1 and stats["cursorPrepare"]["started"] == 1, stats
    assert stats["prefetch"]["cancelled"] == 1


async def test_the_prefetch_survives_a_rest_at_the_accepted_line_s_end_and_serves_the_line_below(client, scripted):
    await accepted_while_prefetching(client, scripted)
    rest_at(client, 3, 14, version=2)
    client.text_document_did_change(types.DidChangeTextDocumentParams(  # `o`: the line below, indented
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=3),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(3, 14), end=pos(3, 14)), text="\n        ")]))
    assert [i.insert_text for i in (await inline(client, URI, 4, 8)).items] == ["print(s)"]
    stats = await command(client, "dllm.serverStats")
    assert stats["prefetch"]["served"] == 1 and stats["prefetch"]["cancelled"] == 0, stats
    assert stats["cursorPrepare"]["prefetching"] == 1 and not scripted.engine.prepare_requests
    assert not scripted.engine.cancelled_requests
