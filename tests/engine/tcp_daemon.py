"""A real `dllm-lsp engine serve` on loopback TCP with a token, for tests that drive it with
real HTTP clients (the openai SDK, node): started, waited for, stopped."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tcp_daemon(serve_args: list[str], token: str, log_path: Path, wait_s: float = 90):
    """Yields the daemon's base URL once /health answers; fails the test with its log if it
    exits or does not answer within `wait_s` (a fresh clone may build a weight cache first)."""
    port = free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--host", "127.0.0.1",
                                 "--port", str(port), "--token", token, "--threads", "1", *serve_args],
                                stdout=log, stderr=log, env={**os.environ, "OMP_NUM_THREADS": "1"})
    base = f"http://127.0.0.1:{port}"
    wait_healthy(proc, lambda: httpx.get(base + "/health", headers={"Authorization": f"Bearer {token}"}).status_code,
                 log_path, wait_s)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def wait_healthy(proc: subprocess.Popen, health, log_path: Path, wait_s: float) -> None:
    """Returns once `health()` (the daemon's /health status code) is 200; fails the test with
    the daemon's log if it exits or does not answer within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if health() == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(Path(log_path).read_text())
