"""Input that is legal JSON but not usable as-is, at the server's boundary (issue 16).

- A lone UTF-16 surrogate (half an emoji) is legal in JSON and in LSP text, but
  no tokenizer can encode it: the server stores it as U+FFFD, which is one
  UTF-16 code unit too, so every later position still means the same place.
"""

from __future__ import annotations

from lsprotocol import types

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
