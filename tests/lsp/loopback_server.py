"""An ASGI app served by uvicorn on a free loopback port, in a background thread: what the
fake FIM endpoint (fake_fim.py) and the scripted daemon (scripted_engine.py) share, so the
server under test reaches them over real HTTP."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn


class LoopbackServer:
    """`with LoopbackServer(app) as s:` serves `app` at `s.url` until the block ends."""

    def __init__(self, app, what: str = "loopback server") -> None:
        self._what = what
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))  # bound now, so the URL is known before the server starts
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self):
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self._what} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(5)
        self._sock.close()
