"""Input that is legal JSON but not usable as-is, at the server's boundary (issue 16).

- A lone UTF-16 surrogate (half an emoji) is legal in JSON and in LSP text, but
  no tokenizer can encode it: the server stores it as U+FFFD, which is one
  UTF-16 code unit too, so every later position still means the same place.
- A position pygls cannot deserialize (negative, 2^31 or more, a missing field)
  gets an InvalidParams error response: every request is answered once.
"""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import Future

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest

from .conftest import command, inline, open_doc, pos, start

URI = "file:///tmp/project/boundary.py"


async def test_lone_surrogates_become_replacement_characters(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url)
    open_doc(client, URI, "s = '\ud83d'\ndef add(a, b):\n    return \n")
    assert [i.insert_text for i in (await inline(client, URI, 2, 11)).items] == ["a + b"]
    assert fake.fim.seen[-1].prompt.startswith("s = '\ufffd'\n")
    # An incremental change with a lone surrogate, then one placed by UTF-16 offsets after it.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(0, 6), end=pos(0, 6)), text="\udc00"),
            types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(0, 7), end=pos(0, 7)), text="!")]))
    assert [i.insert_text for i in (await inline(client, URI, 2, 11)).items] == ["a + b"]
    assert fake.fim.seen[-1].prompt.startswith("s = '\ufffd\ufffd!'\n")
    assert (await command(client, "dllm.engineStatus"))["state"] == "ready"


def send_raw_request(client, method: str, params: dict):
    """A request as raw JSON: the client's typed API would refuse to build these params."""
    msg_id = str(uuid.uuid4())
    future: Future = Future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return asyncio.wrap_future(future)


BAD_POSITIONS = [
    {"line": -1, "character": 0},
    {"line": 0, "character": -1},
    {"line": 2**31, "character": 0},
    {"line": 0, "character": 2**31},
    {"line": 0},
    {"character": 0},
    {"line": None, "character": 0},
]


@pytest.mark.parametrize("method", ["textDocument/inlineCompletion", "textDocument/completion"])
async def test_positions_that_cannot_be_deserialized_get_invalid_params(client, fake, method):
    """Issue 16, defect 2: pygls could not build the params, dropped the message, and the
    request was never answered. Each one gets exactly one InvalidParams response."""
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url)
    open_doc(client, URI, "def add(a, b):\n    return \n")
    for position in BAD_POSITIONS:
        params = {"textDocument": {"uri": URI}, "position": position}
        if method == "textDocument/inlineCompletion":
            params["context"] = {"triggerKind": 2}
        with pytest.raises(JsonRpcInvalidParams):
            await asyncio.wait_for(send_raw_request(client, method, params), 5)
    assert set(client.responses.values()) == {1}  # one response per id, no more
    # The server still serves.
    assert [i.insert_text for i in (await inline(client, URI, 1, 11)).items] == ["a + b"]
    assert not [m for m in client.messages if m.type == types.MessageType.Error]


async def test_changes_to_documents_that_are_not_open_are_logged_not_shown(client, fake):
    await start(client, fake.url)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri="file:///tmp/never-opened.py", version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(0, 0), end=pos(0, 0)), text="x")]))
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri="file:///tmp/never-opened-either.py")))
    await command(client, "dllm.engineStatus")  # a round trip: both notifications were handled
    assert client.messages == []


async def test_requests_after_shutdown_get_invalid_request(client, fake):
    await start(client, fake.url)
    open_doc(client, URI, "def add(a, b):\n    return \n")
    await client.shutdown_async(None)
    params = {"textDocument": {"uri": URI}, "position": {"line": 1, "character": 11}}
    with pytest.raises(JsonRpcInvalidRequest):
        await asyncio.wait_for(send_raw_request(client, "textDocument/completion", params), 5)
    assert set(client.responses.values()) == {1}
    client.exit(None)  # the fixture's own shutdown would now be refused, and exit never sent
    assert await asyncio.wait_for(client._server.wait(), 10) == 0
    client.capabilities = None  # tells the fixture's shutdown_session there is nothing left to do
