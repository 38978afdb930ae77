"""Supersession, $/cancelRequest, debounce and exactly one response per request."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from .conftest import command, complete, inline, open_doc, pos, start, wait_for

URI = "file:///tmp/project/slow.py"
TEXT = "def add(a, b):\n    return \n"


def inline_params(line: int, character: int) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=pos(line, character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic))


async def test_newer_request_supersedes_and_cancels_in_engine(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    fake.fim.delay_s = 5.0
    await start(client, fake.url)
    open_doc(client, URI, TEXT)
    began = time.monotonic()
    first = asyncio.ensure_future(inline(client, URI, 1, 11))
    await wait_for(lambda: len(fake.fim.seen) == 1, what="the first request to reach the engine")
    fake.fim.delay_s = 0.0
    second = await inline(client, URI, 1, 11)
    assert [i.insert_text for i in second.items] == ["a + b"]
    assert not (await first).items  # superseded: answered, empty
    assert time.monotonic() - began < 4.0  # ...long before the slow engine would have answered
    await wait_for(lambda: fake.fim.seen[0].outcome == "disconnected", what="the engine to see the cancel")
    stats = await command(client, "dllm.serverStats")
    assert stats["scheduler"]["superseded_in_engine"] == 1


async def test_a_request_in_another_document_supersedes_the_pending_one(client, fake):
    """The user types in one place: a keystroke in the next file makes the last one's request
    moot (kept, it met the new place's first request in the engine, whose context encoding ran
    between its passes)."""
    fake.fim.rules = [("return ", "a + b")]
    fake.fim.delay_s = 5.0
    await start(client, fake.url)
    other = URI.replace(".py", "_other.py")
    open_doc(client, URI, TEXT)
    open_doc(client, other, TEXT)
    first = asyncio.ensure_future(inline(client, URI, 1, 11))
    await wait_for(lambda: len(fake.fim.seen) == 1, what="the first request to reach the engine")
    fake.fim.delay_s = 0.0
    second = await inline(client, other, 1, 11)
    assert [i.insert_text for i in second.items] == ["a + b"]
    assert not (await first).items  # superseded: answered, empty
    await wait_for(lambda: fake.fim.seen[0].outcome == "disconnected", what="the engine to see the cancel")


async def test_cancel_request_stops_engine_work_and_answers_once(client, fake):
    fake.fim.delay_s = 5.0
    await start(client, fake.url)
    open_doc(client, URI, TEXT)
    future = asyncio.ensure_future(client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(1, 11), msg_id="cancel-me"))
    await wait_for(lambda: len(fake.fim.seen) == 1, what="the request to reach the engine")
    client.cancel_request(types.CancelParams(id="cancel-me"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(future, 3.0)
    await wait_for(lambda: fake.fim.seen[0].outcome == "disconnected", what="the engine to see the cancel")
    await command(client, "dllm.engineStatus")  # the server is alive and in order
    assert client.responses["cancel-me"] == 1


async def test_debounce_keeps_superseded_keystrokes_from_the_engine(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url, debounceMs=300)
    open_doc(client, URI, TEXT)
    results = await asyncio.gather(*(inline(client, URI, 1, 11) for _ in range(5)))
    assert [len(r.items) for r in results] == [0, 0, 0, 0, 1]
    assert len(fake.fim.seen) == 1  # only the last keystroke reached the engine
    stats = (await command(client, "dllm.serverStats"))["scheduler"]
    assert stats["superseded_in_debounce"] == 4


async def test_exactly_one_response_per_request_under_a_burst(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    fake.fim.delay_s = 0.05
    await start(client, fake.url)
    open_doc(client, URI, TEXT)
    ids = [f"burst-{i}" for i in range(31)]  # every tenth cancelled by the client, the last not
    futures = []
    for i, msg_id in enumerate(ids):
        futures.append(asyncio.ensure_future(client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(1, 11), msg_id=msg_id)))
        await asyncio.sleep(0.005)
        if i % 10 == 9:
            client.cancel_request(types.CancelParams(id=msg_id))
    outcomes = await asyncio.gather(*futures, return_exceptions=True)
    await asyncio.sleep(0.3)  # any duplicate answer would arrive by now
    assert all(client.responses[i] == 1 for i in ids), {i: client.responses[i] for i in ids}
    assert not any(isinstance(o, Exception) and not isinstance(o, JsonRpcRequestCancelled) for o in outcomes)
    assert outcomes[-1].items[0].insert_text == "a + b"  # the last one is answered for real


async def test_inline_and_completion_at_one_keystroke_share_one_engine_call(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    fake.fim.delay_s = 0.3
    await start(client, fake.url)
    open_doc(client, URI, TEXT)
    inline_result, listing = await asyncio.gather(inline(client, URI, 1, 11), complete(client, URI, 1, 11))
    assert [i.insert_text for i in inline_result.items] == ["a + b"]
    assert [i.text_edit.new_text for i in listing.items] == ["a + b"]
    assert len(fake.fim.seen) == 1
