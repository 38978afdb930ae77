"""One engine request per snapshot, shared by the requests that want it.

VS Code asks for inline completions and ordinary completions at the same
keystroke; both need the same fill of the same hole. The first request starts
the engine call, the second joins it. The engine call is cancelled only when
every request waiting on it was cancelled (superseded or `$/cancelRequest`),
so sharing never keeps dead work alive and never kills live work.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Hashable


class InflightRequests:
    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Task] = {}
        self._waiters: dict[Hashable, int] = {}
        self.joined = 0  # requests answered by another request's engine call

    async def run(self, key: Hashable, start: Callable[[], Awaitable[Any]]) -> Any:
        task = self._tasks.get(key)
        if task is None or task.done():
            task = self._tasks[key] = asyncio.ensure_future(start())
            self._waiters[key] = 0
            task.add_done_callback(lambda t, key=key: self._forget(key, t))
        else:
            self.joined += 1
        self._waiters[key] += 1
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._waiters[key] -= 1
                if self._waiters[key] == 0:
                    task.cancel()  # nobody wants it any more: stop it in the engine
                    self._forget(key, task)  # a newcomer must not join a call being cancelled
            raise

    def _forget(self, key: Hashable, task: asyncio.Task) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
            self._waiters.pop(key, None)
