"""The next line's prefetch (server/prefetch.py), over real JSON-RPC and the daemon's real HTTP
app with a scripted model: once a suggestion is shown the server fills the line after it in
the background; the editor's request there (the suggestion accepted, Enter, auto-indent) is
answered from the cache; a request that needs the engine cancels a prefetch first; Enter
before the prefetch finished waits for it instead of filling again; the setting turns it off.
The same flow against the real small model is in test_prefetch_real_model.py."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from .conftest import command, inline, open_doc, pos, start, wait_for
from .scripted_engine import ScriptedDaemon

URI = "file:///tmp/project/totals.py"
TEXT = "def total(xs):\n    s = 0\n    for x in xs:\n        \n    return s\n"
NEXT_PLACE = "s += x\n        "  # the prefix's end after accepting line 3's suggestion and Enter


@pytest.fixture
def scripted():
    with ScriptedDaemon() as daemon:
        # Specific keys first: the first rule whose key ends the prefix answers.
        daemon.engine.rules = [(NEXT_PLACE, "print(s)"), ("        ", "s += x"), ("s = 0\n    ", "t = 1")]
        yield daemon


def by_priority(scripted, priority: str) -> list:
    """The engine requests at `priority`, less the engine manager's one-token warm-up probe."""
    return [r for r in scripted.engine.infill_requests if r.priority == priority and r.holes[0].max_tokens > 1]


async def ready(client, scripted, **settings) -> None:
    await start(client, engine={"mode": "remote", "url": scripted.url}, debounceMs=0, **settings)
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
    open_doc(client, URI, TEXT)


def insert(client, version: int, line: int, character: int, text: str) -> None:
    """The editor's change when `text` is typed (or a suggestion taken) at (line, character)."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(line, character), end=pos(line, character)), text=text)]))


def accept_and_enter(client, version: int = 2) -> None:
    """What the editor sends when the user takes line 3's ghost text and presses Enter."""
    insert(client, version, 3, 8, NEXT_PLACE)


async def prefetch_stats(client) -> dict:
    return (await command(client, "dllm.serverStats"))["prefetch"]


async def test_the_next_line_is_answered_from_the_prefetch(client, scripted):
    await ready(client, scripted)
    first = await inline(client, URI, 3, 8)
    assert [i.insert_text for i in first.items] == ["s += x"]
    await wait_for(lambda: len(by_priority(scripted, "batch")) == 1, 10, "the prefetch's engine request")
    ahead = by_priority(scripted, "batch")[0]
    assert ahead.holes[0].prefix.endswith("    for x in xs:\n        " + NEXT_PLACE)
    assert ahead.holes[0].suffix.startswith("\n    return s")  # the rest of the file, as the editor will have it
    stats = await prefetch_stats(client)
    while stats["filled"] < 1:
        await asyncio.sleep(0.02)
        stats = await prefetch_stats(client)
    before = (await command(client, "dllm.serverStats"))["engineRequests"]

    accept_and_enter(client)
    nxt = await inline(client, URI, 4, 8)
    assert [i.insert_text for i in nxt.items] == ["print(s)"]
    after = await command(client, "dllm.serverStats")
    assert after["engineRequests"] == before  # no engine call for the editor's request
    assert len(by_priority(scripted, "interactive")) == 1
    assert after["prefetch"]["served"] == 1 and after["prefetch"]["engineRequests"] >= 1
    # Serving it starts the prefetch of the line after that one.
    await wait_for(lambda: len(by_priority(scripted, "batch")) == 2, 10, "the chained prefetch")
    assert by_priority(scripted, "batch")[1].holes[0].prefix.endswith(NEXT_PLACE + "print(s)\n        ")


async def test_a_request_that_needs_the_engine_cancels_the_prefetch(client, scripted):
    scripted.engine.delays = {NEXT_PLACE: 30.0}  # the prefetch would hold the engine for 30 s
    await ready(client, scripted)
    await inline(client, URI, 3, 8)
    await wait_for(lambda: len(by_priority(scripted, "batch")) == 1, 10, "the prefetch's engine request")
    # The user does not take the suggestion: a new line elsewhere, and a request there.
    insert(client, 2, 1, 9, "\n    ")
    t0 = time.perf_counter()
    other = await inline(client, URI, 2, 4)
    assert time.perf_counter() - t0 < 10
    assert [i.insert_text for i in other.items] == ["t = 1"]
    stats = await prefetch_stats(client)
    assert stats["cancelled"] >= 1 and stats["engineCancelled"] >= 1
    await wait_for(lambda: scripted.engine.cancelled_requests, 10, "the daemon to cancel the prefetch")
    assert scripted.engine.cancelled_requests[0].priority == "batch"


async def test_enter_before_the_prefetch_finished_waits_for_it(client, scripted):
    scripted.engine.delays = {NEXT_PLACE: 1.0}
    await ready(client, scripted)
    await inline(client, URI, 3, 8)
    await wait_for(lambda: len(by_priority(scripted, "batch")) == 1, 10, "the prefetch's engine request")
    accept_and_enter(client)
    nxt = await inline(client, URI, 4, 8)
    assert [i.insert_text for i in nxt.items] == ["print(s)"]
    assert len(by_priority(scripted, "interactive")) == 1  # joined the prefetch: no second fill
    stats = await prefetch_stats(client)
    assert stats["served"] == 1 and stats["cancelled"] == 0


async def test_a_request_at_the_end_of_the_accepted_line_leaves_the_prefetch_running(client, scripted):
    """The editor asks again right after an accept (VS Code at once, Neovim once the user pauses
    before Enter): the suggestion ran to its line's end, so the answer there is "nothing more on
    this line" from the cache, not a fill that would cancel the next line's prefetch."""
    scripted.engine.delays = {NEXT_PLACE: 1.5}
    await ready(client, scripted)
    await inline(client, URI, 3, 8)
    await wait_for(lambda: len(by_priority(scripted, "batch")) == 1, 10, "the prefetch's engine request")
    insert(client, 2, 3, 8, "s += x")
    assert not (await inline(client, URI, 3, 14)).items
    assert (await prefetch_stats(client))["cancelled"] == 0
    insert(client, 3, 3, 14, "\n        ")
    assert [i.insert_text for i in (await inline(client, URI, 4, 8)).items] == ["print(s)"]
    stats = await prefetch_stats(client)
    assert stats["served"] == 1 and stats["cancelled"] == 0, stats
    assert len(by_priority(scripted, "interactive")) == 1  # the shown suggestion's fill, nothing since


async def test_an_explicit_request_at_the_end_of_the_accepted_line_asks_the_engine(client, scripted):
    await ready(client, scripted)
    await inline(client, URI, 3, 8)
    insert(client, 2, 3, 8, "s += x")
    await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=pos(3, 14),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert len(by_priority(scripted, "interactive")) == 2  # the user asked: not answered from the cache


async def test_a_prefetch_that_found_nothing_answers_nothing_without_the_engine(client, scripted):
    scripted.engine.rules = [(NEXT_PLACE, ""), ("        ", "s += x")]
    await ready(client, scripted)
    await inline(client, URI, 3, 8)
    await wait_for(lambda: len(by_priority(scripted, "batch")) == 1, 10, "the prefetch's engine request")
    stats = await prefetch_stats(client)
    while stats["empty"] < 1:
        await asyncio.sleep(0.02)
        stats = await prefetch_stats(client)
    accept_and_enter(client)
    assert not (await inline(client, URI, 4, 8)).items
    assert len(by_priority(scripted, "interactive")) == 1 and (await prefetch_stats(client))["served"] == 1


async def test_a_request_in_another_document_cancels_the_prefetch_too(client, scripted):
    scripted.engine.delays = {NEXT_PLACE: 30.0}
    await ready(client, scripted)
    await inline(client, URI, 3, 8)
    await wait_for(lambda: len(by_priority(scripted, "batch")) == 1, 10, "the prefetch's engine request")
    other = URI.replace("totals", "other")
    open_doc(client, other, TEXT)
    assert [i.insert_text for i in (await inline(client, other, 3, 8)).items] == ["s += x"]
    await wait_for(lambda: scripted.engine.cancelled_requests, 10, "the daemon to cancel the prefetch")
    assert scripted.engine.cancelled_requests[0].priority == "batch"


async def test_the_setting_turns_it_off(client, scripted):
    await ready(client, scripted, prefetchNextLine=False)
    assert [i.insert_text for i in (await inline(client, URI, 3, 8)).items] == ["s += x"]
    accept_and_enter(client)
    assert [i.insert_text for i in (await inline(client, URI, 4, 8)).items] == ["print(s)"]
    assert not by_priority(scripted, "batch") and len(by_priority(scripted, "interactive")) == 2
    assert (await prefetch_stats(client))["started"] == 0
