"""A scripted engine client for the apply/write edge cases (the real model is tested in test_cli_e2e.py)."""

from __future__ import annotations

from dllm_engine.clients import EngineClient
from dllm_engine.protocol import HoleResult, InfillRequest, InfillResult


class ScriptedClient(EngineClient):
    """Answers every hole with ``answer(hole)``; records request sizes; runs ``before_answer`` first."""

    def __init__(self, answer=lambda hole: "return 0", before_answer=None, error: Exception | None = None):
        self.answer = answer
        self.before_answer = before_answer
        self.error = error
        self.request_sizes: list[int] = []

    async def infill(self, request: InfillRequest, on_event=None) -> InfillResult:
        request.validate()
        self.request_sizes.append(len(request.holes))
        if self.before_answer:
            self.before_answer(request)
        if self.error:
            raise self.error
        holes = [HoleResult(self.answer(h), "end", 3, 2) for h in request.holes]
        return InfillResult(request.request_id, holes, "scripted", 1.0)

    async def health(self):
        return {"status": "ok"}
