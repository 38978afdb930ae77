"""A stand-in stdio language server with dllm-lsp's surface and fixed answers.

Used to test the editor clients' mechanics (attach, ghost text, accept,
commands, the `dllm/status` notification) without a model. It follows
/work/notes/lsp-contract.md: the same executeCommand names and status object.
The real server is tested by the same client tests when it is importable
(see conftest.py); this file only pins what the clients must do with answers.

Run: python tests/editors/fake_server.py
"""

from __future__ import annotations

import json
import logging
import sys

from lsprotocol import types
from pygls.lsp.server import LanguageServer

FAKE_COMPLETION = "return a + b"
# Offered instead when the document contains MULTILINE_TRIGGER.
MULTILINE_TRIGGER = "MULTILINE"
FAKE_MULTILINE = "total = a + b\n    return total"
FAKE_ITEM = "dllm_fake_item"
FAKE_INVOKED = "return b + a"  # offered instead when the client asked explicitly (triggerKind Invoked)
REGENERATED = "regenerated_by_dllm"
FILL_MARKER = "{{fill}}"  # the real server's default fillMarker
FAKE_MODEL = "fake-model"

server = LanguageServer("dllm-fake", "0.0.1")
state = {"enabled": True, "init": None, "latency": None}


def status() -> dict:
    """The engineStatus object; `message` echoes the initialization options so a
    client test can check that its settings reached the server."""
    return {
        "state": "ready" if state["enabled"] else "disabled",
        "model": FAKE_MODEL,
        "lastLatencyMs": state["latency"],
        "message": json.dumps(state["init"], sort_keys=True),
    }


def publish_status() -> None:
    server.protocol.notify("dllm/status", status())


@server.feature(types.INITIALIZED)
def initialized(ls: LanguageServer, params: types.InitializedParams) -> None:
    publish_status()


@server.feature(types.INITIALIZE)
def initialize(ls: LanguageServer, params: types.InitializeParams) -> None:
    state["init"] = params.initialization_options
    logging.info("initializationOptions: %s", params.initialization_options)


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
def inline_completion(ls: LanguageServer, params: types.InlineCompletionParams):
    if not state["enabled"]:
        return None
    doc = ls.workspace.get_text_document(params.text_document.uri)
    line = doc.lines[params.position.line] if params.position.line < len(doc.lines) else ""
    if line[: params.position.character].strip():
        return None  # only offer on a blank (indented) line, like the tests type
    state["latency"] = 1.0
    publish_status()
    here = params.position
    text = FAKE_MULTILINE if MULTILINE_TRIGGER in doc.source else FAKE_COMPLETION
    if params.context is not None and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked:
        text = FAKE_INVOKED
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=text, range=types.Range(here, here))])


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."]))
def completion(ls: LanguageServer, params: types.CompletionParams):
    if not state["enabled"]:
        return None
    return types.CompletionList(
        is_incomplete=False,
        items=[types.CompletionItem(label=FAKE_ITEM, kind=types.CompletionItemKind.Text, detail="dllm")],
    )


async def _apply(ls: LanguageServer, uri: str, edits: list[types.TextEdit], label: str) -> dict:
    """Like the real server: answer the command after the client applied the edit."""
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=types.WorkspaceEdit(changes={uri: edits}), label=label)
    )
    return {"applied": bool(result.applied)}


@server.command("dllm.regenerateSelection")
async def regenerate_selection(ls: LanguageServer, uri: str, rng: dict):
    start, end = rng["start"], rng["end"]
    r = types.Range(
        types.Position(start["line"], start["character"]), types.Position(end["line"], end["character"])
    )
    return await _apply(ls, uri, [types.TextEdit(range=r, new_text=REGENERATED)], "Regenerate selection")


@server.command("dllm.fillHoles")
async def fill_holes(ls: LanguageServer, uri: str):
    doc = ls.workspace.get_text_document(uri)
    edits = []
    for number, line in enumerate(doc.lines):
        col = line.find(FILL_MARKER)
        if col >= 0:
            r = types.Range(types.Position(number, col), types.Position(number, col + len(FILL_MARKER)))
            edits.append(types.TextEdit(range=r, new_text="pass"))
    return await _apply(ls, uri, edits, "Fill holes")


@server.command("dllm.toggleCompletions")
def toggle_completions(ls: LanguageServer, *args):
    state["enabled"] = bool(args[0]) if args else not state["enabled"]
    publish_status()
    return {"enabled": state["enabled"]}


@server.command("dllm.restartEngine")
def restart_engine(ls: LanguageServer, *args):
    publish_status()
    return None


@server.command("dllm.engineStatus")
def engine_status(ls: LanguageServer, *args):
    return status()


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    server.start_io()
