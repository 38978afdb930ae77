"""The next line's prefetch against a real model (the small one, in process): the suggestion
the cache serves after the user accepts a line and presses Enter is the one the engine gives
when asked at that place, and the editor's request there costs no engine call."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from dllm_lsp.syntax.after_accept import after_enter
from dllm_lsp.syntax.languages import language_for

from .conftest import capabilities, command, inline, open_doc, wait_for

URI = "file:///tmp/project/scale.py"
TEXT = "import os\n\n\ndef scale(xs, k):\n    out = []\n    for x in xs:\n        \n    return out\n"
LINE, COL = 6, 8


SHOW_ALL = {"lineMinTokenProb": 0, "multilineMinTokenProb": 0}


def position_of(text: str, offset: int) -> types.Position:
    line = text.count("\n", 0, offset)
    return types.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))


@pytest.mark.slow
async def test_the_prefetched_line_is_the_engine_s_own_answer_there(client):
    await client.initialize_session(types.InitializeParams(
        # the small model is unsure of most lines: the unsure gates off, so there is a line to prefetch after
        capabilities=capabilities(), initialization_options={"debounceMs": 0, **SHOW_ALL}))
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] in ("ready", "error"),
                   timeout=60, what="the model to load")
    assert client.statuses[-1]["state"] == "ready", client.statuses[-1]
    open_doc(client, URI, TEXT)
    first = await inline(client, URI, LINE, COL)
    assert first.items, "the small model suggests nothing here: pick another place"
    shown = first.items[0].insert_text
    offset = TEXT.index("        \n    return") + COL
    end = offset + (first.items[0].range.end.character - first.items[0].range.start.character)
    edit = after_enter(TEXT, offset, shown, end, language_for(URI, "python"))
    assert edit is not None
    ahead = TEXT[:edit.start] + edit.text + TEXT[edit.end:]

    async def prefetch() -> dict:
        return (await command(client, "dllm.serverStats"))["prefetch"]

    stats = await prefetch()
    for _ in range(600):  # the prefetch fills in the background: wait until it has answered
        if stats["filled"] + stats["empty"] >= 1:
            break
        await asyncio.sleep(0.05)
        stats = await prefetch()
    assert stats["filled"] == 1, stats
    before = (await command(client, "dllm.serverStats"))["engineRequests"]

    # The user accepts the suggestion and presses Enter; the editor asks at the new line.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=ahead)]))
    where = position_of(ahead, edit.cursor)
    served = await inline(client, URI, where.line, where.character)
    stats = await command(client, "dllm.serverStats")
    assert served.items and stats["engineRequests"] == before and stats["prefetch"]["served"] == 1

    # Asked afresh (new settings clear the cache), the engine answers the same there.
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dllm": {"debounceMs": 0, "prefetchNextLine": False, **SHOW_ALL}}))
    await asyncio.sleep(0.1)
    fresh = await inline(client, URI, where.line, where.character)
    assert (await command(client, "dllm.serverStats"))["engineRequests"] == before + 1
    assert [i.insert_text for i in fresh.items] == [i.insert_text for i in served.items]
