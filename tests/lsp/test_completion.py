"""Completion and inline completion over real JSON-RPC, against the fake FIM engine."""

from __future__ import annotations

from lsprotocol import types

from .conftest import complete, inline, open_doc, pos, start, wait_for

URI = "file:///tmp/project/calc.py"


async def test_inline_item_has_range_at_cursor(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    result = await start(client, fake.url)
    assert result.capabilities.inline_completion_provider is not None
    open_doc(client, URI, "def add(a, b):\n    return \n")
    items = (await inline(client, URI, 1, 11)).items
    assert len(items) == 1
    assert items[0].insert_text == "a + b"
    assert items[0].range == types.Range(start=pos(1, 11), end=pos(1, 11))
    sent = fake.fim.seen[-1]
    assert sent.prompt.endswith("def add(a, b):\n    return ") and sent.suffix.startswith("\n")


async def test_completion_item_has_text_edit(client, fake):
    fake.fim.rules = [("return ", "a * b")]
    result = await start(client, fake.url)
    assert result.capabilities.completion_provider is not None
    open_doc(client, URI, "def mul(a, b):\n    return \n")
    listing = await complete(client, URI, 1, 11)
    assert listing.is_incomplete
    [item] = listing.items
    assert item.text_edit.new_text == "a * b"
    assert item.text_edit.range == types.Range(start=pos(1, 11), end=pos(1, 11))
    assert item.label == "a * b"


async def test_utf16_positions_after_emoji_and_cjk(client, fake):
    # "😀" is 2 UTF-16 units, "中文" 2 units: the cursor after `= ` is at UTF-16 column 14 but str index 13.
    fake.fim.rules = [("= ", "len(s)")]
    await start(client, fake.url)
    text = 'x = "😀中文"; n = \n'
    open_doc(client, URI, text)
    items = (await inline(client, URI, 0, 16)).items
    assert fake.fim.seen[-1].prompt.endswith('x = "😀中文"; n = '), fake.fim.seen[-1].prompt
    assert fake.fim.seen[-1].suffix.startswith("\n")
    assert [i.insert_text for i in items] == ["len(s)"]
    assert items[0].range.start == pos(0, 16)


async def test_utf8_positions_when_negotiated(client, fake):
    fake.fim.rules = [("= ", "len(s)")]
    result = await start(client, fake.url, encodings=["utf-8", "utf-16"])
    assert result.capabilities.position_encoding == "utf-8"
    open_doc(client, URI, 'x = "😀中文"; n = \n')
    # UTF-8: 😀 is 4 bytes, 中 and 文 3 each: the cursor is at byte 22 (str index 13, UTF-16 unit 16).
    items = (await inline(client, URI, 0, 22)).items
    assert fake.fim.seen[-1].prompt.endswith('x = "😀中文"; n = ')
    assert items[0].range.start == pos(0, 22)


async def test_incremental_edits_are_applied_in_order(client, fake):
    fake.fim.rules = [("total = ", "sum(values)")]
    await start(client, fake.url)
    open_doc(client, URI, "def f(values):\n    pass\n")
    # Replace `pass` with `tota` (UTF-16 range), then type `l = ` after it: two changes, one notification each.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(1, 4), end=pos(1, 8)), text="tota")]))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=3),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(1, 8), end=pos(1, 8)), text="l = ")]))
    items = (await inline(client, URI, 1, 12)).items
    assert fake.fim.seen[-1].prompt.endswith("def f(values):\n    total = ")
    assert [i.insert_text for i in items] == ["sum(values)"]


async def test_no_completion_mid_identifier_or_inside_string(client, fake):
    await start(client, fake.url)
    open_doc(client, URI, 'name = "hello world"\nvalue\n')
    assert not (await inline(client, URI, 0, 12)).items  # inside the string
    assert not (await inline(client, URI, 1, 2)).items  # mid-identifier
    assert fake.fim.seen == []  # neither reached the engine


async def test_typing_through_ghost_text_is_served_from_cache(client, fake):
    fake.fim.rules = [("return ", "a + b")]
    await start(client, fake.url)
    open_doc(client, URI, "def add(a, b):\n    return \n")
    assert (await inline(client, URI, 1, 11)).items[0].insert_text == "a + b"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(1, 11), end=pos(1, 11)), text="a ")]))
    items = (await inline(client, URI, 1, 13)).items
    assert [i.insert_text for i in items] == ["+ b"]
    assert items[0].range == types.Range(start=pos(1, 13), end=pos(1, 13))
    assert len(fake.fim.seen) == 1  # the second answer came from the cache


async def test_engine_status_and_progress_reported(client, fake):
    await start(client, fake.url)
    await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), what="a ready status")
    status = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="dllm.engineStatus", arguments=[]))
    assert status["state"] == "ready" and status["model"] == "fake"
    await wait_for(lambda: any(isinstance(r, types.WorkDoneProgressEnd)
                               for values in client.progress_reports.values() for r in values), what="progress end")
    reports = [r for values in client.progress_reports.values() for r in values]
    assert any(isinstance(r, types.WorkDoneProgressBegin) for r in reports)
    assert any(isinstance(r, types.WorkDoneProgressEnd) for r in reports)


async def test_crlf_document_gets_lf_context_and_crlf_edits(client, fake):
    fake.fim.rules = [("    ", "x = 1\n    y = 2")]
    await start(client, fake.url)
    open_doc(client, URI, "def f():\r\n    \r\n")
    items = (await inline(client, URI, 1, 4)).items
    assert "\r" not in fake.fim.seen[-1].prompt and fake.fim.seen[-1].prompt.endswith("def f():\n    ")
    assert [i.insert_text for i in items] == ["x = 1\r\n    y = 2"]
