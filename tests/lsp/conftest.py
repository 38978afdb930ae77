"""Fixtures for the language-server tests: a real server over stdio, a fake FIM engine on loopback."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from .fake_fim import FakeFimServer

ROOT = Path(__file__).resolve().parents[2]
SERVER_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "engine"), str(ROOT / "kernels")]),
    "OMP_NUM_THREADS": "1",
}


@pytest.fixture
def fake():
    with FakeFimServer() as server:
        yield server


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=[sys.executable, "-m", "dllm_lsp", "serve", "-v"], server_env=SERVER_ENV))
async def client(lsp_client: LanguageClient):
    lsp_client.statuses: list[dict[str, Any]] = []  # type: ignore[misc]
    lsp_client.applied_edits: list[types.WorkspaceEdit] = []  # type: ignore[misc]
    lsp_client.responses = Counter()  # type: ignore[misc]  # responses received per request id

    @lsp_client.feature("dllm/status")
    def on_status(params: Any) -> None:
        lsp_client.statuses.append(params if isinstance(params, dict) else params._asdict())

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        lsp_client.applied_edits.append(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    handle = lsp_client.protocol._handle_response

    def counting(msg_id, result=None, error=None):
        lsp_client.responses[msg_id] += 1
        return handle(msg_id, result, error)

    lsp_client.protocol._handle_response = counting
    yield
    try:
        await asyncio.wait_for(lsp_client.shutdown_session(), 10)
    except Exception:
        pass  # a test that killed or broke the server has already failed on its own


def capabilities(encodings: list[str] | None = None) -> types.ClientCapabilities:
    caps = client_capabilities("visual-studio-code")
    if encodings is not None:
        caps.general = caps.general or types.GeneralClientCapabilities()
        caps.general.position_encodings = encodings
    return caps


async def start(client: LanguageClient, url: str | None = None, encodings: list[str] | None = None,
                **options: Any) -> types.InitializeResult:
    init: dict[str, Any] = {"debounceMs": 0, **options}
    if url is not None:
        init["engine"] = {"mode": "openai", "url": url, "openaiModel": "fake", **init.get("engine", {})}
    return await client.initialize_session(types.InitializeParams(
        capabilities=capabilities(encodings), initialization_options=init, process_id=os.getpid()))


def open_doc(client: LanguageClient, uri: str, text: str, language_id: str = "python", version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=version, text=text)))


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


async def inline(client: LanguageClient, uri: str, line: int, character: int):
    return await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=pos(line, character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)))


async def complete(client: LanguageClient, uri: str, line: int, character: int):
    return await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=pos(line, character)))


async def command(client: LanguageClient, name: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(args)))


async def wait_for(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
