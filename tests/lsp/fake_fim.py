"""A tiny OpenAI-compatible FIM endpoint on loopback, for protocol tests.

The server under test reaches it through its real `openai` engine mode (httpx
over TCP), so cancellation is observable for real: when the server cancels a
request, its HTTP connection drops and this endpoint records the drop.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .loopback_server import LoopbackServer


@dataclass
class Seen:
    prompt: str
    suffix: str
    max_tokens: int
    outcome: str = "pending"  # answered | disconnected | failed


@dataclass
class FakeFim:
    # (end of the prompt, completion): the first rule whose key ends the prompt answers.
    rules: list[tuple[str, str]] = field(default_factory=list)
    default: str = "pass"
    delay_s: float = 0.0
    status: int = 200
    seen: list[Seen] = field(default_factory=list)

    def answer_for(self, prompt: str) -> str:
        for key, text in self.rules:
            if prompt.endswith(key):
                return text
        return self.default

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        seen = Seen(body["prompt"], body.get("suffix", ""), body.get("max_tokens", 0))
        self.seen.append(seen)
        deadline = time.monotonic() + self.delay_s
        while time.monotonic() < deadline:
            if await request.is_disconnected():
                seen.outcome = "disconnected"
                return JSONResponse({"error": "client went away"}, status_code=499)
            await asyncio.sleep(0.01)
        if self.status != 200:
            seen.outcome = "failed"
            return JSONResponse({"error": "the fake engine is told to fail"}, status_code=self.status)
        seen.outcome = "answered"
        text = self.answer_for(seen.prompt)
        return JSONResponse({
            "choices": [{"text": text, "finish_reason": "stop"}],
            "usage": {"completion_tokens": len(text.split())},
        })

    def outcomes(self) -> list[str]:
        return [s.outcome for s in self.seen]


class FakeFimServer(LoopbackServer):
    """Runs a FakeFim app on loopback in a background thread; `url` is its base URL."""

    def __init__(self) -> None:
        self.fim = FakeFim()
        super().__init__(Starlette(routes=[Route("/v1/completions", self.fim.completions, methods=["POST"])]),
                         "fake FIM server")


def closed_port_url() -> str:
    """A loopback URL where nothing listens (an engine that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"
