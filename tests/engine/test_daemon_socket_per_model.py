"""One daemon per model: the default socket path depends on the model and the settings that
change its answers. It was one path per user, so a session configured with another model
than the first one's silently shared the first one's daemon and got its model."""

import asyncio
import subprocess
import sys
import time

from dllm_engine.clients import DaemonClient, default_socket_path, socket_name
from dllm_engine.protocol import Hole, InfillRequest


def test_the_name_follows_the_model_and_its_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("DLLM_LSP_MODEL", raising=False)
    assert socket_name(None) == socket_name("default") == "engine.sock"  # what it always was
    folder = tmp_path / "my model"
    folder.mkdir()
    names = {socket_name("small"), socket_name(str(folder)), socket_name("default", dtype="bfloat16"),
             socket_name("default", device="cpu"), socket_name("small", dtype="float16")}
    assert len(names) == 5 and "engine.sock" not in names
    assert socket_name(str(folder)).startswith("engine-my-model-")
    monkeypatch.chdir(tmp_path)  # the same folder named another way is the same daemon
    assert socket_name("my model") == socket_name(str(folder)) == socket_name(str(tmp_path / "." / "my model"))
    monkeypatch.setenv("DLLM_LSP_MODEL", "small")  # what a daemon loads when no model is named
    assert socket_name(None) == socket_name("small")


def test_a_socket_path_stays_short(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    deep = tmp_path / ("a" * 60) / ("b" * 60)
    deep.mkdir(parents=True)
    # "engine-" + 24 characters of name + "-" + 12 of hash + ".sock", whatever the folder's depth
    assert len(default_socket_path(str(deep), "cuda:1", "bfloat16").name) == 49


async def test_two_models_get_two_daemons(tiny_model, tmp_path, monkeypatch):
    """One daemon started by hand (`engine serve --model`, no --socket), one spawned by a client."""
    import httpx

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    by_hand = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--model", str(tiny_model),
                                "--idle-exit", "60", "--threads", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tiny_socket = default_socket_path(str(tiny_model))
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(tiny_socket)), base_url="http://e") as h:
        deadline = time.monotonic() + 60
        while True:
            try:
                if (await h.get("/health")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert by_hand.poll() is None and time.monotonic() < deadline, "engine serve did not start"
            await asyncio.sleep(0.1)
    small = DaemonClient(spawn=True, model="small", idle_exit_s=2.0)
    tiny = DaemonClient(spawn=True, model=str(tiny_model), idle_exit_s=2.0)
    daemons = [by_hand]
    try:
        assert tiny.socket_path == tiny_socket and small.socket_path != tiny_socket
        assert small.socket_path.parent == tiny_socket.parent == tmp_path / "dllm-lsp"
        await asyncio.gather(small.infill(InfillRequest(holes=[Hole(prefix="x = ", max_tokens=4)])),
                             tiny.infill(InfillRequest(holes=[Hole(prefix="y = ", max_tokens=4)])))
        daemons += [c._spawned for c in (small, tiny) if c._spawned is not None]
        assert small._spawned is not None and tiny._spawned is None  # it found the one started by hand
        assert (await small.health())["model"] == "small"
        assert (await tiny.health())["model"] == tiny_model.name
    finally:
        await small.close()
        await tiny.close()
        by_hand.terminate()
        deadline = time.monotonic() + 30
        for proc in daemons:  # the spawned one exits once idle
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
    assert not any(p.suffix == ".sock" for p in (tmp_path / "dllm-lsp").iterdir())
