"""An httpx transport over a Unix socket that checks who listens before sending a byte.

httpx has no hook between connecting and sending, so the transport's connection pool
gets a network backend that checks each new connection's peer (SO_PEERCRED, see
socket_security.py) and closes it, raising `UnsafeSocket`, when the daemon does not
run as the user. `_pool._network_backend` is httpx/httpcore internals: the test in
tests/engine/test_socket_security.py fails if a new httpx moves it.
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx

from .socket_security import UnsafeSocket, check_peer


class _PeerCheckingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend, error: type[UnsafeSocket]) -> None:
        self._inner = inner
        self._error = error

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        try:
            check_peer(stream.get_extra_info("socket"), path)
        except UnsafeSocket as exc:
            await stream.aclose()
            raise self._error(str(exc)) from None
        return stream

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_tcp(*args, **kwargs)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def peer_checked_transport(uds: str, error: type[UnsafeSocket] = UnsafeSocket) -> httpx.AsyncHTTPTransport:
    """`error`: the UnsafeSocket subclass to raise (clients.py's is also an EngineUnavailable)."""
    transport = httpx.AsyncHTTPTransport(uds=uds)
    pool = transport._pool
    pool._network_backend = _PeerCheckingBackend(pool._network_backend, error)
    return transport
