"""The daemon's socket: a private folder, never a file unlinked, a peer that is the user (issue 16, defects 5-6).

CI runs as root: a "foreign" owner is made with chown to an unprivileged uid,
and a fake daemon of another user drops to that uid before it listens.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dllm_engine.clients import DaemonClient, UnsafeDaemonSocket
from dllm_engine.daemon import bind_unix_socket
from dllm_engine.socket_security import UnsafeSocket, check_dir, ensure_private_dir

NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="making a foreign owner needs root (CI runs as root)")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_folder_and_its_missing_parents_are_created_0700(tmp_path):
    old = os.umask(0o022)
    try:
        ensure_private_dir(tmp_path / "base" / "dllm-lsp")
    finally:
        os.umask(old)
    assert mode(tmp_path / "base") == 0o700 and mode(tmp_path / "base" / "dllm-lsp") == 0o700
    sock = bind_unix_socket(tmp_path / "fresh" / "run" / "engine.sock")
    sock.close()
    assert mode(tmp_path / "fresh" / "run") == 0o700


@pytest.mark.parametrize("where", ["folder", "parent"])
def test_a_folder_others_can_write_is_refused(tmp_path, where):
    base = tmp_path / "dllm-lsp-1000"
    folder = base / "dllm-lsp"
    folder.mkdir(parents=True)
    (folder if where == "folder" else base).chmod(0o777)
    with pytest.raises(SystemExit, match="writable by group or others"):
        bind_unix_socket(folder / "engine.sock")
    with pytest.raises(UnsafeSocket, match="chmod 700"):
        check_dir(folder)
    assert not (folder / "engine.sock").exists()


def test_a_sticky_shared_parent_like_tmp_is_fine(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    ensure_private_dir(shared / "dllm-lsp-1000" / "dllm-lsp")  # no error


@as_root
def test_a_folder_owned_by_another_user_is_refused(tmp_path):
    folder = tmp_path / "dllm-lsp-0" / "dllm-lsp"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder.parent, NOBODY, NOBODY)  # another user pre-created the base, even 0700
    with pytest.raises(SystemExit, match=f"owned by uid {NOBODY}"):
        bind_unix_socket(folder / "engine.sock")


async def test_the_client_refuses_an_unsafe_folder_before_connecting(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    folder.chmod(0o777)
    client = DaemonClient(socket_path=folder / "engine.sock", spawn=True)
    try:
        with pytest.raises(UnsafeDaemonSocket, match="writable by group or others"):
            await client.health()
        with pytest.raises(UnsafeDaemonSocket):
            from dllm_engine.protocol import Hole, InfillRequest

            await client.infill(InfillRequest(holes=[Hole(prefix="x")]))
    finally:
        await client.close()
    assert client._spawned is None and not list(folder.iterdir())


def test_a_regular_file_given_as_socket_is_never_unlinked(tmp_path):
    precious = tmp_path / "notes.txt"
    precious.write_text("do not delete\n")
    with pytest.raises(SystemExit, match="not a socket"):
        bind_unix_socket(precious)
    assert precious.read_text() == "do not delete\n"
    # A stale socket (nobody listening) is still replaced.
    stale = tmp_path / "engine.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))
    dead.close()
    bind_unix_socket(stale).close()


def serve_health_once(sock: socket.socket, received: list[bytes]) -> None:
    conn, _ = sock.accept()
    data = conn.recv(65536)
    received.append(data)
    if data:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\nContent-Type: application/json\r\n\r\n"
                     b'{"status":"ok"}')
    conn.close()


async def test_a_daemon_of_the_user_is_talked_to(tmp_path):
    path = tmp_path / "engine.sock"
    server = bind_unix_socket(path)
    received: list[bytes] = []
    t = threading.Thread(target=serve_health_once, args=(server, received), daemon=True)
    t.start()
    client = DaemonClient(socket_path=path)
    try:
        assert (await client.health())["status"] == "ok"
    finally:
        await client.close()
        server.close()
    assert received and received[0].startswith(b"GET /health")


FAKE_DAEMON = r"""
import os, socket, sys
listener = socket.socket(fileno=int(sys.argv[1]))
os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[2]))
listener.listen(4)  # SO_PEERCRED reports who called listen(): now another user
print("listening", flush=True)
conn, _ = listener.accept()
data = conn.recv(65536)
sys.stderr.write(f"received {len(data)} bytes\n")
conn.close()
"""


@as_root
async def test_a_daemon_of_another_user_gets_no_code(tmp_path):
    path = tmp_path / "engine.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o666)
    proc = subprocess.Popen([sys.executable, "-c", FAKE_DAEMON, str(sock.fileno()), str(NOBODY)],
                            pass_fds=[sock.fileno()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "listening"
        client = DaemonClient(socket_path=path)
        try:
            from dllm_engine.protocol import Hole, InfillRequest

            with pytest.raises(UnsafeDaemonSocket, match=f"runs as uid {NOBODY}"):
                await client.infill(InfillRequest(holes=[Hole(prefix="SECRET = 'hunter2'\n")]))
        finally:
            await client.close()
        _, err = proc.communicate(timeout=10)
        assert "received 0 bytes" in err
    finally:
        proc.kill()
        sock.close()
