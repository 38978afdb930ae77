"""A stateful fuzz of the real language server over stdio (issue 16, the systematic part).

Hypothesis drives `dllm-lsp serve` as a careless editor would: documents opened
(again) and closed, incremental edits with random ranges (in range, past the end,
negative, 2^31 and more) carrying lone surrogates, CRLF, NUL and emoji, every
request the server offers (inline completion, completion, code actions and their
resolve, every dllm.* command, an unknown dllm/* method) and `dllm/prepareCompletion` at random positions,
valid or not, params missing, and `$/cancelRequest` for requests in flight.

After each run of steps: every request has exactly one response, no "internal
error" popup was shown, stdout held nothing but JSON-RPC frames, and the server
is alive; at the end, `shutdown` and a request after it are answered and `exit`
ends the process with status 0. One server process serves all the runs (each run
works on its own URIs), so a broken state left by one run is met by the next.

Against the fake FIM engine (fast, with a delay so cancels meet requests in
flight) and, shorter, against the real small model in process. Fixed seeds
(derandomize, no database), so CI sees the same inputs every time.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from .conftest import ROOT, SERVER_ENV

_spec = importlib.util.spec_from_file_location("_lsp_wire", ROOT / "benchmarks" / "_lsp_wire.py")
wire = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wire)

SNIPPETS = ["def f(x):\n    return ", "    ", "\n", "\r\n", "\r", "\x00", "\ud800", "\udc00", "\ud83d", "😀", "é",
            "(", ")", "[", "]", ":", "=", "# TODO\n", "x = 1\n", "\t", '"""', "class A:\n    def m(self):\n        "]
TEXT = st.one_of(
    st.lists(st.sampled_from(SNIPPETS), max_size=12).map("".join),
    st.text(max_size=20),
    st.text(st.characters(codec="utf-8"), max_size=8),
)
OUT_OF_RANGE = st.sampled_from([-1, -(2**31), 2**31, 2**31 - 1, 2**32, 2**63])
LANGUAGES = st.sampled_from(["python", "python", "javascript", "rust", "plaintext", "weird", ""])
COMMANDS = ["dllm.regenerateSelection", "dllm.fillHoles", "dllm.engineStatus", "dllm.serverStats",
            "dllm.toggleCompletions", "dllm.restartEngine", "dllm.noSuchCommand"]
_uris = itertools.count()


class ServerFuzz(RuleBasedStateMachine):
    """One run of steps against the shared server `ServerFuzz.server`."""

    server: wire.WireServer
    answer_timeout_s = 30.0
    commands = COMMANDS

    def __init__(self) -> None:
        super().__init__()
        self.docs: dict[str, list[str]] = {}  # uri -> the text's lines, as this client believes them
        self.ids: list[int] = []
        self.version = 1

    # ------------------------------------------------------------ helpers

    def _popups(self) -> int:
        return sum(1 for n in list(self.server.notifications) if n.get("method") == "window/showMessage"
                   and "internal error" in str(n.get("params", {}).get("message", "")))

    def _uri(self, data, known_only: bool = False) -> str:
        if self.docs and (known_only or data.draw(st.integers(0, 9)) > 0):
            return data.draw(st.sampled_from(sorted(self.docs)))
        return f"file:///fuzz/never-opened-{next(_uris)}.py"

    def _position(self, data, uri: str) -> dict:
        lines = self.docs.get(uri, [""])
        if data.draw(st.integers(0, 7)) == 0:
            return {"line": data.draw(OUT_OF_RANGE | st.integers(0, 3)), "character": data.draw(OUT_OF_RANGE | st.integers(0, 3))}
        line = data.draw(st.integers(0, len(lines)))  # one past the last line too
        width = len(lines[line]) if line < len(lines) else 0
        return {"line": line, "character": data.draw(st.integers(0, width + 2))}

    def _range(self, data, uri: str) -> dict:
        a, b = self._position(data, uri), self._position(data, uri)
        if data.draw(st.booleans()):
            a, b = sorted([a, b], key=lambda p: (p["line"], p["character"]))
        return {"start": a, "end": b}

    def _request(self, method: str, params) -> None:
        self.ids.append(self.server.request(method, params))

    # ------------------------------------------------------------ documents

    @rule(data=st.data(), text=TEXT, language=LANGUAGES)
    def open(self, data, text, language):
        uri = self._uri(data)  # an open document opened again, too
        self.docs[uri] = text.split("\n")
        self.server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language, "version": self.version, "text": text}})

    @rule(data=st.data(), text=TEXT)
    def edit(self, data, text):
        uri = self._uri(data)
        rng = self._range(data, uri)
        self.version += 1
        self.server.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": self.version},
            "contentChanges": [{"range": rng, "text": text}]})
        if uri in self.docs:
            self._mirror(uri, rng, text)

    @rule(data=st.data(), text=TEXT)
    def replace_whole(self, data, text):
        uri = self._uri(data)
        self.version += 1
        self.server.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": self.version}, "contentChanges": [{"text": text}]})
        if uri in self.docs:
            self.docs[uri] = text.split("\n")

    @rule(data=st.data())
    def close(self, data):
        uri = self._uri(data)
        self.server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        self.docs.pop(uri, None)

    def _mirror(self, uri: str, rng: dict, text: str) -> None:
        """Follows an in-range edit roughly (code points, not UTF-16): it only steers positions."""
        lines = self.docs[uri]
        (l1, c1), (l2, c2) = ((p["line"], p["character"]) for p in (rng["start"], rng["end"]))
        if not (0 <= l1 <= l2 < len(lines)) or min(c1, c2) < 0 or (l1, c1) > (l2, c2):
            return
        whole = "\n".join(lines)
        start = sum(len(x) + 1 for x in lines[:l1]) + min(c1, len(lines[l1]))
        end = sum(len(x) + 1 for x in lines[:l2]) + min(c2, len(lines[l2]))
        self.docs[uri] = (whole[:start] + text + whole[end:]).split("\n")

    # ------------------------------------------------------------- requests

    @rule(data=st.data(), trigger=st.sampled_from([1, 2]))
    def inline_completion(self, data, trigger):
        uri = self._uri(data)
        self._request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": self._position(data, uri), "context": {"triggerKind": trigger}})

    @rule(data=st.data())
    def completion(self, data):
        uri = self._uri(data)
        self._request("textDocument/completion", {"textDocument": {"uri": uri}, "position": self._position(data, uri)})

    @rule(data=st.data())
    def code_action(self, data):
        uri = self._uri(data)
        diagnostics = data.draw(st.sampled_from([[], [{"range": self._range(data, uri), "message": "x", "source": "dllm",
                                                        "data": {"alternative": "y"}}]]))
        self._request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": self._range(data, uri), "context": {"diagnostics": diagnostics}})

    @rule(data=st.data())
    def resolve_code_action(self, data):
        uri = self._uri(data)
        payload = data.draw(st.sampled_from([{"uri": uri, "range": self._range(data, uri)}, None, "junk", {"uri": 3}]))
        self._request("codeAction/resolve", {"title": "Regenerate selection with dllm", "data": payload})

    @rule(data=st.data())
    def execute_command(self, data):
        name = data.draw(st.sampled_from(self.commands))
        uri = self._uri(data)
        args = data.draw(st.sampled_from([[uri, self._range(data, uri)], [uri], [], [True], [None, 3], ["x", "y"]]))
        self._request("workspace/executeCommand", {"command": name, "arguments": args})

    @rule(data=st.data())
    def malformed_request(self, data):
        """Params missing a field, of the wrong type, or absent; an unknown dllm/* method."""
        uri = self._uri(data)
        method, params = data.draw(st.sampled_from([
            ("textDocument/inlineCompletion", {"textDocument": {"uri": uri}}),
            ("textDocument/completion", {"position": {"line": 0, "character": 0}}),
            ("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": "0", "character": 0}}),
            ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": None, "context": {}}),
            ("textDocument/inlineCompletion", None),
            ("workspace/executeCommand", {"arguments": []}),
            ("dllm/noSuchRequest", {"uri": uri}),
        ]))
        self._request(method, params)

    @rule(data=st.data())
    def cursor_rests(self, data):
        """`dllm/prepareCompletion` (a notification: no answer to count): any version, any
        position, params missing or of the wrong type."""
        uri = self._uri(data)
        version = data.draw(st.sampled_from([self.version, 1, 0, -1, 2**31, "1", None]))
        params = data.draw(st.sampled_from([
            {"textDocument": {"uri": uri, "version": version}, "position": self._position(data, uri)},
            {"textDocument": {"uri": uri}, "position": self._position(data, uri)},
            {"textDocument": {"uri": uri, "version": version}},
            None, [], "junk"]))
        self.server.notify("dllm/prepareCompletion", params)

    @rule(data=st.data())
    def cancel(self, data):
        if self.ids:
            self.server.cancel(data.draw(st.sampled_from(self.ids[-4:])))

    # ------------------------------------------------------------ checks

    @invariant()
    def speaks_only_protocol(self):
        assert not self.server.violations, self.server.violations[:3]
        assert self.server.proc.poll() is None, "the server died:\n" + self.server.stderr_text()[-3000:]

    def teardown(self):
        missing = self.server.wait_answered(self.ids, self.answer_timeout_s)
        assert not missing, f"unanswered after {self.answer_timeout_s} s: {missing}\n" + self.server.stderr_text()[-3000:]
        twice = {i: n for i in self.ids if (n := self.server.responses[i]) != 1}
        assert not twice, f"answered more than once: {twice}"
        # Leave the next run a clean slate: close what this run left open, turn completions back on.
        for uri in self.docs:
            self.server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        self.server.call("workspace/executeCommand", {"command": "dllm.toggleCompletions", "arguments": [True]},
                         timeout=self.answer_timeout_s)
        # Messages are handled in order: a popup for any step of this run has arrived by now.
        assert not self._popups(), [n for n in self.server.notifications if n.get("method") == "window/showMessage"][-3:]
        self.speaks_only_protocol()


def _start(init_options: dict) -> wire.WireServer:
    server = wire.WireServer([sys.executable, "-m", "dllm_lsp", "serve", "-v"], env=SERVER_ENV)
    reply = server.call("initialize", {"processId": None, "rootUri": None, "initializationOptions": init_options,
                                       "capabilities": {"window": {"workDoneProgress": True},
                                                        "textDocument": {"codeAction": {"resolveSupport": {
                                                            "properties": ["edit"]}}}}})
    assert "result" in reply, reply
    server.notify("initialized", {})
    return server


def _finish(server: wire.WireServer) -> None:
    reply = server.call("shutdown")
    assert reply.get("result", "missing") is None, reply
    late = server.call("textDocument/completion", {"textDocument": {"uri": "file:///x.py"},
                                                   "position": {"line": 0, "character": 0}})
    assert late["error"]["code"] == -32600, late  # InvalidRequest after shutdown
    server.notify("exit")
    server.proc.stdin.close()
    assert server.proc.wait(10) == 0
    assert not server.violations, server.violations[:3]
    unanswered = server.unanswered()
    assert not unanswered, unanswered


def _still_serves(server: wire.WireServer, expect_model: str | None = None) -> None:
    """After the fuzz, a plain inline request reaches the engine and is answered by it."""
    uri = "file:///fuzz/after.py"
    server.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": "def add(a, b):\n    return \n"}})
    stats = lambda: server.call("workspace/executeCommand", {"command": "dllm.serverStats", "arguments": []})["result"]
    before = stats()["engineRequests"]
    reply = server.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {
        "line": 1, "character": 11}, "context": {"triggerKind": 1}}, timeout=60)
    assert "result" in reply, reply
    after = stats()
    assert after["engineRequests"] == before + 1, after
    if expect_model is not None:
        assert after["lastResult"]["model"] == expect_model and after["lastResult"]["passes"] >= 1, after


def _fuzz(server: wire.WireServer, examples: int, steps: int, **machine) -> None:
    machine_cls = type("Fuzz", (ServerFuzz,), {"server": server, **machine})
    run_state_machine_as_test(machine_cls, settings=settings(
        max_examples=examples, stateful_step_count=steps, derandomize=True, database=None, deadline=None,
        suppress_health_check=list(HealthCheck), print_blob=False,
        # No shrinking: every failing step waits out a timeout, and the shared server keeps state
        # across runs anyway; the failing run's steps are printed as drawn.
        phases=[Phase.explicit, Phase.generate]))


def _wait_ready(server: wire.WireServer, timeout: float) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [n["params"].get("state") for n in list(server.notifications) if n.get("method") == "dllm/status"]
        if states and states[-1] in ("ready", "error"):
            assert states[-1] == "ready", server.stderr_text()[-2000:]
            return
        time.sleep(0.05)
    raise AssertionError("the engine never became ready")


def test_fuzzed_session_against_the_fake_engine(fake):
    fake.fim.rules = [("return ", "x + 1"), ("= ", "[]")]
    fake.fim.delay_s = 0.02  # long enough for cancels to meet requests in flight
    server = _start({"debounceMs": 0, "engine": {"mode": "openai", "url": fake.url, "openaiModel": "fake"}})
    try:
        _wait_ready(server, 30)
        _fuzz(server, examples=40, steps=30)
        _still_serves(server)
        _finish(server)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    assert fake.fim.seen, "no request reached the engine: the fuzz did not exercise completions"


@pytest.mark.slow
def test_fuzzed_session_against_the_real_small_model():
    server = _start({"debounceMs": 0})
    try:
        _wait_ready(server, 120)
        # Restarting reloads the model (seconds): the fake-engine run covers it.
        _fuzz(server, examples=12, steps=20, answer_timeout_s=90.0,
              commands=[c for c in COMMANDS if c != "dllm.restartEngine"])
        _still_serves(server, expect_model="small")
        _finish(server)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
