"""The server against a real engine daemon: on a Unix socket (mode `daemon`) and over TCP
with a bearer token (mode `remote`)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from lsprotocol import types

from .conftest import SERVER_ENV, capabilities, command, inline, open_doc, pos, wait_for

URI = "file:///tmp/project/daemon.py"


@pytest.fixture(params=["unix", "tcp"])
def daemon(request, tmp_path):
    """A running engine daemon; yields the server's `engine` settings for it."""
    import httpx

    if request.param == "unix":
        socket_path = tmp_path / "engine.sock"
        where = ["--socket", str(socket_path)]
        settings = {"mode": "daemon", "socket": str(socket_path)}
        http = httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)), base_url="http://engine")
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token = "test-token"
        where = ["--host", "127.0.0.1", "--port", str(port), "--token", token]
        settings = {"mode": "remote", "url": f"http://127.0.0.1:{port}", "token": token}
        http = httpx.Client(base_url=settings["url"], headers={"Authorization": f"Bearer {token}"})
    proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", *where, "--idle-exit", "120"],
                            env=SERVER_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        # Wait for the model: a client that finds the daemon still loading would spawn another
        # one on the same socket (DaemonClient._ensure_running pings /health, 503 while loading).
        deadline = time.monotonic() + 60
        while True:
            try:
                if http.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("engine daemon did not start")
            time.sleep(0.1)
        yield settings
    finally:
        http.close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
async def test_daemon_serves_and_cancels(client, daemon):
    await client.initialize_session(types.InitializeParams(capabilities=capabilities(), initialization_options={
        "debounceMs": 0, "engine": daemon}))
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] in ("ready", "error"), timeout=60,
                   what="the daemon to be ready")
    assert client.statuses[-1]["state"] == "ready", client.statuses[-1]
    # The settings name no model: the status says what the daemon serves, not "default".
    assert client.statuses[-1]["model"] == "small", client.statuses[-1]
    open_doc(client, URI, "def add(a, b):\n    return \n")
    await inline(client, URI, 1, 11)
    stats = await command(client, "dllm.serverStats")
    assert stats["lastResult"]["model"] == "small" and stats["lastResult"]["passes"] >= 1
    assert stats["engineHealth"]["status"] == "ok"

    # Supersede a request in flight: its HTTP request is dropped, which cancels it in the daemon.
    # A block body (no stop at the newline, up to 128 tokens) keeps the first request busy.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=pos(2, 0), end=pos(2, 0)), text="\n\ndef mul(a, b):\n    ")]))
    first = asyncio.ensure_future(inline(client, URI, 5, 4))
    await asyncio.sleep(0.15)
    await inline(client, URI, 5, 4)
    assert not (await first).items
    stats = await command(client, "dllm.serverStats")
    assert stats["engineCancelled"] == 1 and stats["scheduler"]["superseded_in_engine"] == 1
