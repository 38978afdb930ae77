"""stdout carries the protocol and nothing else, even at the most verbose log level."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from .conftest import SERVER_ENV


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def parse_frames(stdout: bytes) -> list[dict]:
    replies = []
    while stdout:
        m = re.match(rb"Content-Length: (\d+)\r\n(?:[^\r\n]+\r\n)*\r\n", stdout)
        assert m, f"non-protocol bytes on stdout: {stdout[:200]!r}"
        end = m.end() + int(m.group(1))
        replies.append(json.loads(stdout[m.end():end]))
        stdout = stdout[end:]
    return replies


def test_stdout_is_only_protocol_frames():
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None,
                                                                       "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": "file:///t.py", "languageId": "python", "version": 1, "text": "def f():\n    \n"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    stdin = b"".join(frame(m) for m in messages)
    cmd = [sys.executable, "-m", "dllm_lsp", "serve", "-vv", "--engine", "openai", "--url", "http://127.0.0.1:9"]
    out = subprocess.run(cmd, input=stdin, env=SERVER_ENV, capture_output=True, timeout=60)
    assert out.stderr, "the server should log to stderr at -vv"
    replies = parse_frames(out.stdout)
    by_id = {r["id"]: r for r in replies if "id" in r and "method" not in r}
    caps = by_id[1]["result"]["capabilities"]
    assert caps["inlineCompletionProvider"] is not None and caps["completionProvider"] is not None
    assert set(caps["executeCommandProvider"]["commands"]) >= {
        "dllm.regenerateSelection", "dllm.fillHoles", "dllm.toggleCompletions", "dllm.restartEngine",
        "dllm.engineStatus"}
    assert by_id[2]["result"] is None


def test_malformed_messages_are_reported_once_and_the_server_stays_up():
    garbage = b"{not json"
    stdin = b"".join([
        frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"processId": None, "rootUri": None, "capabilities": {}}}),
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        b"Content-Length: %d\r\n\r\n%s" % (len(garbage), garbage),
        b"Content-Length: %d\r\n\r\n%s" % (len(garbage), garbage),
        frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"bogus": True}}),
        frame({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
               "params": {"command": "dllm.engineStatus", "arguments": []}}),
        frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
        frame({"jsonrpc": "2.0", "method": "exit"}),
    ])
    cmd = [sys.executable, "-m", "dllm_lsp", "serve", "--engine", "openai", "--url", "http://127.0.0.1:9"]
    out = subprocess.run(cmd, input=stdin, env=SERVER_ENV, capture_output=True, timeout=60)
    replies = parse_frames(out.stdout)
    shown = [r for r in replies if r.get("method") == "window/showMessage"]
    assert len(shown) == 1 and "internal error" in shown[0]["params"]["message"], shown
    by_id = {r.get("id"): r for r in replies if "method" not in r}
    assert by_id[2]["result"]["state"] in ("loading", "ready", "error")
    assert by_id[3]["result"] is None


def test_a_notification_with_unreadable_params_is_logged_not_shown():
    """Issue 16: a didChange with a negative position (or a version past 2^31) cannot be
    deserialized; pygls popped up "internal error: Invalid Params" for the client's mistake."""
    bad_range = {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}}
    stdin = b"".join(frame(m) for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None,
                                                                       "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": "file:///t.py", "languageId": "python", "version": 2**40, "text": "x\n"}}},
        {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": "file:///t.py", "version": 2}, "contentChanges": [{"range": bad_range, "text": "y"}]}},
        {"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
         "params": {"command": "dllm.engineStatus", "arguments": []}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ])
    cmd = [sys.executable, "-m", "dllm_lsp", "serve", "--engine", "openai", "--url", "http://127.0.0.1:9"]
    out = subprocess.run(cmd, input=stdin, env=SERVER_ENV, capture_output=True, timeout=60)
    replies = parse_frames(out.stdout)
    assert not [r for r in replies if r.get("method") == "window/showMessage"], replies
    by_id = {r.get("id"): r for r in replies if "method" not in r}
    assert by_id[2]["result"]["state"] in ("loading", "ready", "error") and by_id[3]["result"] is None
    assert b"invalid params for notification textDocument/didChange" in out.stderr
