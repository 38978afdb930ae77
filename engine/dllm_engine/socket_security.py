"""Trust for the daemon's Unix socket: its folder, the file at its path, the process behind it.

The socket carries the user's code both ways, so (as ssh-agent and gpg-agent do):

- its folder is created 0700, and refused when it, or a folder above it, could be
  changed by another user: owned by someone other than the user or root, or
  writable by group/others without the sticky bit (`/tmp` itself is fine). Another
  user who pre-creates `/tmp/dllm-lsp-$UID` 0777 could otherwise move the socket
  away and put a fake daemon in its place;
- only a socket is ever unlinked at the socket's path (a stale one); a regular
  file there is refused, never deleted;
- the client checks the peer's credentials (SO_PEERCRED) on every connection,
  before it sends a byte: the daemon must run as the user (or root).

No torch, no pygls: the language server's engine client imports this.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path


class UnsafeSocket(RuntimeError):
    """A socket folder, socket path or daemon that the user's code must not go through."""


def _trusted_owner(uid: int) -> bool:
    return uid in (os.getuid(), 0)


def ensure_private_dir(folder: Path) -> None:
    """Create `folder` (and missing parents) 0700, then check it and every folder above it."""
    missing = []
    for p in [folder, *folder.parents]:
        if os.path.lexists(p):
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:  # created meanwhile (another client): checked below like any other
            pass
    check_dir(folder)


def check_dir(folder: Path) -> None:
    """Refuse a socket folder that another user could change, or that sits in one."""
    real = Path(os.path.realpath(folder))
    for p in [real, *real.parents]:
        try:
            st = os.stat(p)
        except OSError as exc:
            raise UnsafeSocket(f"cannot check socket folder {p}: {exc.strerror}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeSocket(f"socket folder {p} is not a folder")
        if not _trusted_owner(st.st_uid):
            raise UnsafeSocket(f"refusing socket folder {p}: owned by uid {st.st_uid}, not by you (uid "
                               f"{os.getuid()}); remove it or pass --socket elsewhere")
        others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if others_write and not (st.st_mode & stat.S_ISVTX and p != real):
            raise UnsafeSocket(f"refusing socket folder {p}: writable by group or others (mode "
                               f"{stat.S_IMODE(st.st_mode):o}); run `chmod 700 {p}` or pass --socket elsewhere")


def check_stale_path(path: Path) -> None:
    """Before unlinking a stale socket: refuse anything at `path` that is not a socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise UnsafeSocket(f"{path} exists and is not a socket; refusing to replace it (pass another --socket)")


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (None where unknown)."""
    if not hasattr(socket, "SO_PEERCRED"):  # not Linux: the folder checks are what is left
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def check_peer(sock: socket.socket, path: object) -> None:
    uid = peer_uid(sock)
    if uid is not None and not _trusted_owner(uid):
        raise UnsafeSocket(f"the engine daemon on {path} runs as uid {uid}, not as you (uid {os.getuid()}); "
                           "not sending it your code")
