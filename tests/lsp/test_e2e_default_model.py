"""End to end against the real engine and the embedded default model, in process.

What the model writes is not asserted (the default model is small); that the
server loads it after answering `initialize`, sends real requests, shapes and
positions the answers, and cancels superseded work in the engine, is.
"""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from .conftest import capabilities, command, complete, inline, open_doc, pos, wait_for

URI = "file:///tmp/project/e2e.py"
TEXT = "import os\n\n\ndef add(a, b):\n    return \n\n\ndef scale(xs, k):\n    out = [x * k for x in xs]\n    return out\n"


@pytest.mark.slow
async def test_default_model_serves_completions_and_edits(client):
    await client.initialize_session(types.InitializeParams(
        capabilities=capabilities(), initialization_options={"debounceMs": 0}))
    # initialize is answered before the model loads (it takes seconds to load).
    assert (await command(client, "dllm.engineStatus"))["state"] == "loading"
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] in ("ready", "error"),
                   timeout=60, what="the default model to load")
    assert client.statuses[-1]["state"] == "ready", client.statuses[-1]
    # The load was shown as $/progress: begun, reported ("loading the model"), ended "ready".
    def load_reports():
        return [r for token, r in client.progress_reports.items() if str(token).startswith("dllm-engine-load")]

    await wait_for(lambda: load_reports() and isinstance(load_reports()[0][-1], types.WorkDoneProgressEnd),
                   what="the end of the load's progress")
    [reports] = load_reports()
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert reports[-1].message == "ready"
    open_doc(client, URI, TEXT)
    # The text as opened is the baseline; a changed line is scored token by token and its
    # diagnostics published (maybe none). A long file too: its change is scored in windows,
    # where a file longer than ~1,700 characters never got a diagnostic (its head, scored
    # first, was refused at every edit).
    long_uri, long_text = "file:///tmp/project/long.py", "".join(
        f"def f{i}(x):\n    return x * {i} + f{i - 1}(x)\n\n\n" for i in range(1, 120))
    open_doc(client, long_uri, long_text)
    for uri, text in ((URI, TEXT), (long_uri, long_text)):
        line = text.count("\n") - 2
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=pos(line, 0), end=pos(line, 0)), text="totl = 0\n")]))
        await wait_for(lambda uri=uri: uri in client.diagnostics, timeout=60, what=f"diagnostics for {uri}")
        assert all(d.source == "dllm" for d in client.diagnostics[uri])
    client.text_document_did_change(types.DidChangeTextDocumentParams(  # back to the text the test types into
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=3),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=TEXT)]))

    before = await command(client, "dllm.serverStats")
    items = (await inline(client, URI, 4, 11)).items
    stats = await command(client, "dllm.serverStats")
    assert stats["engineRequests"] == before["engineRequests"] + 1
    last = stats["lastResult"]
    assert last["model"] == "small" and last["passes"] >= 1
    for item in items:  # whatever survived shaping sits at the cursor
        assert item.insert_text and item.range.start == pos(4, 11)

    listing = await complete(client, URI, 4, 11)
    for item in listing.items:
        assert item.text_edit.range.start == pos(4, 11) and item.text_edit.new_text

    # A cancelled request stops in the engine: the await is cancelled, the engine drops the canvas.
    client.text_document_did_change(types.DidChangeTextDocumentParams(  # a keystroke: the cache no longer applies
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=4),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(4, 11), end=pos(4, 11)), text="(")]))
    cancelled_before = (await command(client, "dllm.serverStats"))["engineCancelled"]
    # Sampling hot keeps the model from ending the fill early, so the request is surely
    # still denoising when the cancel arrives (greedy fills of this model can end in 30 ms).
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dllm": {
        "debounceMs": 0, "multiline": "always", "diffusion": {"temperature": 5.0, "seed": 1}}}))
    await command(client, "dllm.engineStatus")  # the settings are applied before the next request
    future = asyncio.ensure_future(client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION,
        # An empty line between definitions, multi-line asked for: no stop at the newline, many passes.
        types.InlineCompletionParams(text_document=types.TextDocumentIdentifier(uri=URI), position=pos(5, 0),
                                     context=types.InlineCompletionContext(
                                         trigger_kind=types.InlineCompletionTriggerKind.Invoked)),
        msg_id="e2e-cancel"))
    await asyncio.sleep(0.1)  # in the engine by now
    client.cancel_request(types.CancelParams(id="e2e-cancel"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(future, 10)
    assert (await command(client, "dllm.serverStats"))["engineCancelled"] == cancelled_before + 1
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dllm": {
        "debounceMs": 0}}))
    await command(client, "dllm.engineStatus")

    # Regenerate a selection: one real engine request; an edit only if the fill keeps the file parsing.
    requests = (await command(client, "dllm.serverStats"))["engineRequests"]
    result = await command(client, "dllm.regenerateSelection", URI,
                           {"start": {"line": 8, "character": 10}, "end": {"line": 8, "character": 29}})
    assert (await command(client, "dllm.serverStats"))["engineRequests"] == requests + 1
    if result["applied"]:
        [edit] = client.applied_edits
        [text_edit] = edit.document_changes[0].edits
        assert text_edit.range == types.Range(start=pos(8, 10), end=pos(8, 29))


@pytest.mark.slow
async def test_in_process_engine_that_cannot_load_is_reported_once(client, tmp_path):
    await client.initialize_session(types.InitializeParams(capabilities=capabilities(), initialization_options={
        "debounceMs": 0, "engine": {"mode": "inProcess", "model": str(tmp_path / "no-such-checkpoint")}}))
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] == "error", timeout=60,
                   what="the load to fail")
    open_doc(client, URI, TEXT)
    for _ in range(3):
        assert not (await inline(client, URI, 4, 11)).items
    errors = [m for m in client.messages if m.type == types.MessageType.Error]
    assert len(errors) == 1 and "no-such-checkpoint" in errors[0].message
    assert (await command(client, "dllm.engineStatus"))["state"] == "error"
