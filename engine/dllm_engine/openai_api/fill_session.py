"""One engine request seen from a streaming response: submit, then the events as they come.

Submitting happens before the response starts, and so does the wait for the first
event, so that a full queue (429), a prompt over the window or any other refusal the
engine makes at admission is still a proper HTTP error, not an error inside a 200
stream. A client that goes away mid-stream cancels the engine request (`close`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.requests import Request

from ..protocol import CanvasEvent, InfillRequest, InfillResult, RequestCancelled, SettledText

POLL_S = 0.05  # how often a wait checks whether the client is still there


@dataclass
class Finished:
    result: InfillResult | None
    error: BaseException | None


class FillSession:
    def __init__(self, engine, req: InfillRequest, canvases: bool = False) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()
        push = self._push
        self.handle = engine.submit(req, on_event=push if canvases else None, on_settled=None if canvases else push)
        # Engine thread: settled texts of a pass are queued before the future completes.
        self.handle.future.add_done_callback(lambda f: self._push(None))
        self._first = None

    def _push(self, item) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def start(self, request: Request) -> None:
        """Wait for the first event; raise the engine's refusal if that is what came."""
        get = asyncio.ensure_future(self._queue.get())
        try:
            while True:
                done, _ = await asyncio.wait({get}, timeout=POLL_S)
                if done:
                    break
                if await request.is_disconnected():
                    self.close()
                    raise RequestCancelled("client disconnected")
        finally:
            if not get.done():
                get.cancel()
        self._first = get.result()
        if self._first is None and self.handle.future.exception() is not None:
            raise self.handle.future.exception()

    async def events(self):
        """SettledText / CanvasEvent items, then one `Finished`."""
        item, self._first = self._first, None
        while True:
            if item is None:
                exc = self.handle.future.exception()
                yield Finished(None if exc else self.handle.future.result(), exc)
                return
            if isinstance(item, (SettledText, CanvasEvent)):
                yield item
            item = await self._queue.get()

    def close(self) -> None:
        if not self.handle.future.done():
            self.handle.cancel()
