"""`DaemonClient(spawn=True)` starts a daemon when none listens (gopls -remote=auto) and it exits when idle."""

import asyncio
import time

from dllm_engine.clients import DaemonClient
from dllm_engine.protocol import Hole, InfillRequest


async def test_spawns_shares_and_exits_when_idle(tiny_model, tmp_path):
    sock = tmp_path / "rt" / "engine.sock"
    first = DaemonClient(socket_path=sock, spawn=True, model=str(tiny_model), idle_exit_s=2.0)
    second = DaemonClient(socket_path=sock, spawn=True, model=str(tiny_model), idle_exit_s=2.0)
    try:
        a = await first.infill(InfillRequest(holes=[Hole(prefix="x = ", max_tokens=4)]))
        b = await second.infill(InfillRequest(holes=[Hole(prefix="y = ", max_tokens=4)]))
        assert a.holes[0].passes >= 1 and b.holes[0].passes >= 1
        assert first._spawned is not None and second._spawned is None  # the second one reused it
        assert (await second.health())["requests_done"] == 2
    finally:
        await first.close()
        await second.close()
    deadline = time.monotonic() + 30
    while sock.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not sock.exists()
    assert first._spawned.wait(10) == 0


async def test_a_daemon_that_cannot_load_is_reported_not_respawned(tmp_path):
    import pytest

    from dllm_engine.clients import EngineUnavailable

    sock = tmp_path / "rt" / "engine.sock"
    client = DaemonClient(socket_path=sock, spawn=True, model=str(tmp_path / "missing-model"), idle_exit_s=2.0)
    try:
        with pytest.raises(EngineUnavailable, match="missing-model"):
            await client.infill(InfillRequest(holes=[Hole(prefix="x = ", max_tokens=4)]))
        with pytest.raises(EngineUnavailable):
            await client.health()  # 503 while broken: a clear error, not a TypeError
    finally:
        await client.close()
        if client._spawned is not None:
            client._spawned.terminate()
            client._spawned.wait(10)


def test_a_broken_daemon_exits_nonzero_after_its_idle_period(tmp_path):
    """The idle clock starts when loading ends, so /health can say why for the whole idle period."""
    import subprocess
    import sys

    sock = tmp_path / "rt" / "engine.sock"
    sock.parent.mkdir()
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--socket", str(sock),
                        "--idle-exit", "1.5", "--model", str(tmp_path / "missing-model")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "missing-model" in r.stderr
    assert not sock.exists()
    assert time.monotonic() - start >= 1.5


async def test_the_exit_report_quotes_the_daemons_log(tmp_path, monkeypatch):
    """When the spawned daemon is gone before a client could ask /health, its log says why."""
    import subprocess
    import sys

    import pytest

    from dllm_engine import clients
    from dllm_engine.clients import EngineUnavailable, daemon_log_path

    def spawn_one_that_dies(socket_path, model, idle_exit_s):
        daemon_log_path(socket_path).write_text(
            "Traceback (most recent call last):\n  ...\nFileNotFoundError: no model at /x/y\n")
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])

    monkeypatch.setattr(clients, "spawn_daemon", spawn_one_that_dies)
    sock = tmp_path / "rt" / "engine.sock"
    sock.parent.mkdir()
    client = DaemonClient(socket_path=sock, spawn=True, start_timeout_s=30)
    try:
        with pytest.raises(EngineUnavailable, match=r"code 1: .*FileNotFoundError: no model at /x/y"):
            await client._ensure_running()
    finally:
        await client.close()
