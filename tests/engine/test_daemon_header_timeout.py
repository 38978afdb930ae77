"""A client that opens a connection and sends nothing, or part of its headers, is not held (issue 16, defect 7).

uvicorn times out neither: the audit's client was held over 40 s. The real daemon,
started as the user starts it, answers such a connection 408 and closes it once
--header-timeout passes, and still serves whole requests, kept-alive ones included.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

import httpx


def _connect(path: str) -> socket.socket:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(10)
    c.connect(path)
    return c


def _answer_and_time(c: socket.socket) -> tuple[bytes, float]:
    start = time.monotonic()
    answer = b""
    while chunk := c.recv(65536):  # until the daemon closes the connection
        answer += chunk
    return answer, time.monotonic() - start


def _one_response(c: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += c.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
    while len(body) < length:
        body += c.recv(65536)
    return data


def test_silent_and_half_sent_headers_get_408(tiny_model, tmp_path):
    sock = tmp_path / "run" / "engine.sock"
    log = open(tmp_path / "daemon.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--socket", str(sock),
                             "--model", str(tiny_model), "--threads", "1", "--header-timeout", "0.5"],
                            stdout=log, stderr=log)
    try:
        client = httpx.Client(base_url="http://e", transport=httpx.HTTPTransport(uds=str(sock)), timeout=30)
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "daemon.log").read_text()
            time.sleep(0.2)

        silent = _connect(str(sock))
        half = _connect(str(sock))
        half.sendall(b"POST /v1/infill HTTP/1.1\r\nHost: e\r\nContent-Le")
        for c in (silent, half):
            answer, took = _answer_and_time(c)
            assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive" in answer, answer
            assert took < 5, took
            c.close()

        # Whole requests still go through, two on one kept-alive connection with a pause between.
        kept = _connect(str(sock))
        for _ in range(2):
            kept.sendall(b"GET /health HTTP/1.1\r\nHost: e\r\n\r\n")
            assert _one_response(kept).startswith(b"HTTP/1.1 200")
            time.sleep(0.8)  # past the header deadline, within uvicorn's 5 s keep-alive
        kept.close()
        assert client.post("/v1/infill", json={"holes": [{"prefix": "x = ", "max_tokens": 4}]}).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        log.close()
