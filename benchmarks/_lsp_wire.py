"""A raw JSON-RPC client for `dllm-lsp serve` over stdio, for fuzzing and soaking the real server.

It sends any dict as one frame (malformed params included, which a typed client
such as pygls's would refuse to build), and it checks what comes back byte by
byte: every byte on stdout must belong to a `Content-Length` frame holding a
JSON-RPC 2.0 object, every response is counted per id (a second answer to one id
is a bug too), and the server's own requests (progress tokens, configuration,
applyEdit) are answered as an editor would, so the server never waits on us.

Used by tests/lsp/test_fuzz_stateful.py and benchmarks/bench_soak.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections import Counter
from typing import Any

HEADER = re.compile(rb"Content-Length: (\d+)\r\n(?:[A-Za-z-]+: [^\r\n]*\r\n)*\r\n")


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()  # ensure_ascii: a lone surrogate goes as \ud800, legal JSON
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _reply_to(method: str, params: Any) -> Any:
    """What an editor answers to the server's own requests."""
    if method == "workspace/configuration":
        return [None] * len((params or {}).get("items", []))
    if method == "workspace/applyEdit":
        return {"applied": True}
    return None  # window/workDoneProgress/create, client/registerCapability, ...


class WireServer:
    """One server process; thread-safe `request`/`notify`; `violations` lists every protocol breach seen."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=env, bufsize=0)
        self._lock = threading.Lock()
        self._answered = threading.Condition(self._lock)
        self._next_id = 0
        self.sent_at: dict[int, float] = {}
        self.pending: set[int] = set()  # sent, not yet answered
        self.latency_s: dict[int, float] = {}
        self.responses: Counter = Counter()  # id -> responses received
        self.results: dict[Any, dict] = {}  # id -> the (last) response
        self.notifications: list[dict] = []
        self.violations: list[str] = []
        self.bytes_read = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # ------------------------------------------------------------- sending

    def send(self, message: dict) -> None:
        data = frame(message)
        with self._lock:  # one writer at a time: frames must not interleave
            self.proc.stdin.write(data)

    def request(self, method: str, params: Any = None) -> int:
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            self.sent_at[msg_id] = time.perf_counter()
            self.pending.add(msg_id)
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def cancel(self, msg_id: int) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    # ------------------------------------------------------------- waiting

    def wait_answered(self, ids, timeout: float) -> list[int]:
        """Waits until every id in `ids` has a response; returns those still unanswered."""
        deadline = time.monotonic() + timeout
        with self._answered:
            while True:
                missing = [i for i in ids if not self.responses[i]]
                left = deadline - time.monotonic()
                if not missing or left <= 0 or self.proc.poll() is not None:
                    return missing
                self._answered.wait(min(left, 0.5))

    def call(self, method: str, params: Any = None, timeout: float = 30) -> dict:
        msg_id = self.request(method, params)
        if self.wait_answered([msg_id], timeout):
            raise TimeoutError(f"{method} (id {msg_id}) unanswered after {timeout} s")
        return self.results[msg_id]

    def unanswered(self) -> list[int]:
        with self._lock:
            return sorted(self.pending)

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def close(self, timeout: float = 30) -> int:
        """shutdown + exit; returns the exit status (killing a server that does not exit in time)."""
        try:
            if self.proc.poll() is None:
                self.call("shutdown", timeout=timeout)
                self.notify("exit")
                self.proc.stdin.close()
            return self.proc.wait(timeout)
        except (OSError, TimeoutError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self._reader.join(5)

    def rss_kb(self) -> int:
        """Resident memory now (not the peak): /proc/PID/status VmRSS."""
        return rss_kb(self.proc.pid)

    # ------------------------------------------------------------- reading

    def _read(self) -> None:
        buf = b""
        out = self.proc.stdout
        while True:
            chunk = os.read(out.fileno(), 1 << 16)
            if not chunk:
                break
            self.bytes_read += len(chunk)
            buf += chunk
            while buf:
                m = HEADER.match(buf)
                if m is None:
                    if not _could_become_header(buf):
                        self._violation(f"non-protocol bytes on stdout: {buf[:120]!r}")
                        buf = b""
                    break
                end = m.end() + int(m.group(1))
                if len(buf) < end:
                    break
                body, buf = buf[m.end():end], buf[end:]
                self._dispatch(body)
        with self._answered:
            self._answered.notify_all()

    def _dispatch(self, body: bytes) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            self._violation(f"a frame that is not JSON: {body[:120]!r}")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._violation(f"not a JSON-RPC 2.0 object: {body[:120]!r}")
            return
        if "method" in message and "id" in message:  # the server asks us something
            self.send({"jsonrpc": "2.0", "id": message["id"],
                       "result": _reply_to(message["method"], message.get("params"))})
        elif "method" in message:
            with self._lock:
                self.notifications.append(message)
        elif "id" in message:
            if ("result" in message) == ("error" in message):
                self._violation(f"a response with both or neither of result/error: {body[:120]!r}")
            with self._answered:
                msg_id = message["id"]
                self.responses[msg_id] += 1
                self.results[msg_id] = message
                self.pending.discard(msg_id)
                if msg_id in self.sent_at and msg_id not in self.latency_s:
                    self.latency_s[msg_id] = time.perf_counter() - self.sent_at[msg_id]
                self._answered.notify_all()
        else:
            self._violation(f"neither request, notification nor response: {body[:120]!r}")

    def _violation(self, what: str) -> None:
        with self._lock:
            self.violations.append(what)


def _could_become_header(buf: bytes) -> bool:
    """A partial frame header still arriving (not yet a breach)."""
    lead = b"Content-Length: "
    if len(buf) < len(lead):
        return lead.startswith(buf)
    return buf.startswith(lead) and b"\r\n\r\n" not in buf and len(buf) < 4096


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
