"""A deadline on a request's headers for the daemon's HTTP server (uvicorn over h11).

uvicorn has no timeout on receiving a request: `timeout_keep_alive` covers only the
idle time between requests and is cancelled by the first byte of the next one, so a
client that connects and sends nothing, or part of its headers, holds the connection
(and a slot of the daemon's) as long as it likes; uvicorn's `--timeout-request-start`
was proposed (uvicorn issue 157) and never built. The body has its own deadline in the
app (daemon.py: 408 when the body does not follow its headers in time); this covers
the part before the app sees anything.

The clock starts when the connection opens, and again at the first byte of each later
request on a kept-alive connection; it stops when h11 has parsed the request line and
headers. On expiry the client gets a 408 and the connection is closed.
"""

from __future__ import annotations

import asyncio
import json
import logging

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT_S = 10.0


class HeaderDeadlineProtocol(H11Protocol):
    header_timeout_s = DEFAULT_HEADER_TIMEOUT_S

    _deadline: asyncio.TimerHandle | None = None
    _cycle_at_arm: object = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # a new request starts on a kept-alive connection
        super().data_received(data)
        if self._deadline is not None and self.cycle is not self._cycle_at_arm:
            self._disarm()  # h11 has the request line and headers: the app takes it from here

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._cycle_at_arm = self.cycle
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log.info("closing a connection whose request headers did not arrive within %g s", self.header_timeout_s)
        body = json.dumps({"error": f"request headers did not arrive within {self.header_timeout_s:g} s"}).encode()
        # No response has begun on this connection (the headers never completed): a raw one is safe.
        self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                             b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        self.transport.close()


def header_deadline_protocol(timeout_s: float = DEFAULT_HEADER_TIMEOUT_S) -> type[HeaderDeadlineProtocol]:
    """The protocol class to pass as uvicorn.Config(http=...), with its header deadline."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": timeout_s})
