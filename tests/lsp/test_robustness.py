"""Bad input and a failing engine: empty results, one message, a server that stays up."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from .conftest import command, complete, inline, open_doc, pos, start, wait_for
from .fake_fim import closed_port_url

URI = "file:///tmp/project/robust.py"


async def test_invalid_options_fall_back_to_defaults_with_one_message(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url, debounceMs="fast", context={"prefixTokens": -5}, languages="all", colour=True)
    await wait_for(lambda: client.messages, what="a showMessage")
    [message] = client.messages
    assert message.type == types.MessageType.Warning
    for name in ("debounceMs", "context.prefixTokens", "languages", "colour"):
        assert name in message.message
    open_doc(client, URI, "def add(a, b):\n    return \n")
    assert [i.insert_text for i in (await inline(client, URI, 1, 11)).items] == ["a + b"]
    # The same settings restated (as Neovim does after initialize): no second message.
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dllm": {
        "debounceMs": "fast", "engine": {"mode": "openai", "url": fake.url, "openaiModel": "fake"}}}))
    await command(client, "dllm.engineStatus")
    assert len(client.messages) == 2 and "debounceMs" in client.messages[1].message  # a different problem set
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dllm": {
        "debounceMs": "fast", "engine": {"mode": "openai", "url": fake.url, "openaiModel": "fake"}}}))
    await command(client, "dllm.engineStatus")
    assert len(client.messages) == 2


async def test_engine_down_gives_empty_results_and_one_message(client):
    await start(client, closed_port_url())
    open_doc(client, URI, "def add(a, b):\n    return \n")
    for _ in range(4):
        assert not (await inline(client, URI, 1, 11)).items
        assert not (await complete(client, URI, 1, 11)).items
    errors = [m for m in client.messages if m.type == types.MessageType.Error]
    assert len(errors) == 1 and "unreachable" in errors[0].message
    status = await command(client, "dllm.engineStatus")
    assert status["state"] == "error" and status["message"]


async def test_crashing_engine_recovers_after_restart(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    fake.fim.status = 500
    await start(client, fake.url)
    open_doc(client, URI, "def add(a, b):\n    return \n")
    assert not (await inline(client, URI, 1, 11)).items
    assert not (await inline(client, URI, 1, 11)).items  # in back-off: not even sent
    assert fake.fim.outcomes() == ["failed"]
    fake.fim.status = 200
    await command(client, "dllm.restartEngine")
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] == "ready", what="ready again")
    assert [i.insert_text for i in (await inline(client, URI, 1, 11)).items] == ["a + b"]
    assert len([m for m in client.messages if m.type == types.MessageType.Error]) == 1


async def test_failed_connection_is_rebuilt_after_the_back_off(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    fake.fim.status = 503
    await start(client, fake.url)
    open_doc(client, URI, "def add(a, b):\n    return \n")
    assert not (await inline(client, URI, 1, 11)).items
    fake.fim.status = 200
    await asyncio.sleep(1.2)  # the first back-off is 1 s
    assert [i.insert_text for i in (await inline(client, URI, 1, 11)).items] == ["a + b"]
    assert client.statuses[-1]["state"] == "ready"


async def test_invalid_positions_and_unknown_documents(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url)
    open_doc(client, URI, "def add(a, b):\n    return \n")
    assert not (await inline(client, URI, 40, 0)).items  # past the last line
    assert not (await inline(client, "file:///tmp/never-opened.py", 0, 0)).items
    # A character past the end of the line means the end of the line (LSP 3.17).
    assert [i.insert_text for i in (await inline(client, URI, 1, 500)).items] == ["a + b"]
    # A change to a document that is not open, and one with an impossible range, are logged and dropped.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri="file:///tmp/nope.py", version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="x")]))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(90, 0), end=pos(91, 0)), text="boom")]))
    assert (await command(client, "dllm.engineStatus"))["state"] == "ready"
    assert [i.insert_text for i in (await inline(client, URI, 1, 11)).items] == ["a + b"]


async def test_unknown_language_gets_line_based_context(client, fake):
    fake.fim.rules = [("total = ", "42")]
    await start(client, fake.url)
    uri = "file:///tmp/project/notes.weird"
    open_doc(client, uri, "count = 1\ntotal = \n", language_id="weird")
    items = (await inline(client, uri, 1, 8)).items
    assert [i.insert_text for i in items] == ["42"]


async def test_huge_document_is_served_without_a_tree(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url)
    body = "x = 1\n" * 400_000  # 2.4 MB: past the syntax-tree limit
    open_doc(client, URI, body + "def add(a, b):\n    return \n")
    items = (await inline(client, URI, 400_001, 11)).items
    assert [i.insert_text for i in items] == ["a + b"]
    assert len(fake.fim.seen[-1].prompt) < 20_000  # the context window is cut to the budget


async def test_disabled_language_and_toggle(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url, languages={"python": False})
    open_doc(client, URI, "def add(a, b):\n    return \n")
    assert not (await inline(client, URI, 1, 11)).items
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dllm": {
        "engine": {"mode": "openai", "url": fake.url, "openaiModel": "fake"}, "debounceMs": 0}}))
    await wait_for(lambda: fake.fim.seen == [] and client.statuses[-1]["state"] == "ready", what="reconfigured")
    assert [i.insert_text for i in (await inline(client, URI, 1, 11)).items] == ["a + b"]
    assert await command(client, "dllm.toggleCompletions", False) == {"enabled": False}
    await wait_for(lambda: client.statuses[-1]["state"] == "disabled", what="a disabled status")
    assert not (await inline(client, URI, 1, 11)).items
    assert await command(client, "dllm.toggleCompletions") == {"enabled": True}
    assert len(fake.fim.seen) == 1


async def test_starting_disabled_then_enabled_by_configuration(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url, enable=False)
    open_doc(client, URI, "def add(a, b):\n    return \n")
    await wait_for(lambda: client.statuses, what="a status")
    assert client.statuses[0]["state"] == "disabled"
    assert not (await inline(client, URI, 1, 11)).items
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dllm": {
        "enable": True, "debounceMs": 0, "engine": {"mode": "openai", "url": fake.url, "openaiModel": "fake"}}}))
    await wait_for(lambda: client.statuses[-1]["state"] == "ready", what="ready after enabling")
    assert [i.insert_text for i in (await inline(client, URI, 1, 11)).items] == ["a + b"]
    assert len(fake.fim.seen) == 1
