"""The daemon's real HTTP app on loopback, over a scripted engine: protocol tests of next edits.

The server under test reaches it in its `remote` engine mode (the DaemonClient over TCP);
the next-edit request runs the engine's real `next_edit.service.propose` (span choice,
holes, confidence), and only the model is scripted: every scored token has probability
`prob`, and a hole whose prefix ends with a rule's key is filled with its text.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from dllm_engine.checkpoint import SMALL_MODEL_DIR
from dllm_engine.daemon import EngineHost, build_app
from dllm_engine.next_edit.service import propose
from dllm_engine.protocol import HoleResult, InfillResult, ScoreResult, TokenScore
from dllm_engine.tokenizer import TextTokenizer

try:
    from .loopback_server import LoopbackServer
except ImportError:  # imported as a top-level module: tests/editors puts tests/lsp on sys.path
    from loopback_server import LoopbackServer


@dataclass
class ScriptedEngine:
    rules: list[tuple[str, str]] = field(default_factory=list)
    prob: float = 0.9
    next_edit_requests: list = field(default_factory=list)
    infill_requests: list = field(default_factory=list)
    model_name: str = "scripted"
    # A fill whose prefix ends with a key answers after that many seconds (cancellable meanwhile).
    delays: dict = field(default_factory=dict)
    cancelled_requests: list = field(default_factory=list)
    prepare_requests: list = field(default_factory=list)
    prepare_delay: float = 0.0
    prepares_stopped: int = 0
    # Best of N (params.candidates > 1): a hole whose prefix ends with a key gets these as its
    # other fills, as the engine's candidates.py returns them (best read first).
    alternatives: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tokenizer = TextTokenizer(SMALL_MODEL_DIR / "tokenizer.json")

    def fill(self, prefix: str) -> str:
        return next((text for key, text in self.rules if prefix.endswith(key)), "")

    def _fill_hole(self, hole, candidates: int = 1) -> HoleResult:
        """A hole whose min_token_prob is above `prob` ends unsure half-way, as the engine's does."""
        text = self.fill(hole.prefix)
        if hole.min_token_prob is not None and self.prob < hole.min_token_prob:
            return HoleResult(text[: len(text) // 2], "unsure", 1, 1)
        others = next((alts for key, alts in self.alternatives.items() if hole.prefix.endswith(key)), [])
        return HoleResult(text, "end", 1, 1, alternatives=list(others[:candidates - 1]))

    def submit(self, request, on_event=None, on_settled=None):
        self.infill_requests.append(request)
        future: Future = Future()
        result = InfillResult(request.request_id, [self._fill_hole(h, request.params.candidates) for h in request.holes],
                              self.model_name, 1.0)
        delay = max((d for key, d in self.delays.items() if any(h.prefix.endswith(key) for h in request.holes)),
                    default=0.0)
        timer = threading.Timer(delay, lambda: future.done() or future.set_result(result))
        timer.start()

        def cancel(_self) -> None:
            timer.cancel()
            if not future.done():
                self.cancelled_requests.append(request)
                future.set_exception(RuntimeError("cancelled"))

        return type("Handle", (), {"future": future, "result": lambda self, timeout=None: future.result(timeout),
                                   "cancel": cancel})()

    def score(self, request):
        _, offsets = self.tokenizer.encode_with_offsets(request.span)
        return ScoreResult(request.request_id, [TokenScore(s, e, request.span[s:e], self.prob, "x", self.prob)
                                                for s, e in offsets], self.model_name, 0.0)

    def next_edit(self, request, cancel=None):
        self.next_edit_requests.append(request)
        return propose(self, request, cancel)

    def prepare(self, request, cancel=None):
        """Records the place; takes `prepare_delay` seconds (stopping early when cancelled)."""
        from dllm_engine.prepare import PrepareResult

        self.prepare_requests.append(request)
        stopped = cancel is not None and cancel.wait(self.prepare_delay)
        if stopped:
            self.prepares_stopped += 1
        tokens = len(self.tokenizer.encode(request.suffix + request.prefix))
        return PrepareResult(request.request_id, tokens, 0, 0 if stopped else tokens, not stopped, 0.0)

    def health(self) -> dict:
        return {"status": "ok", "model": self.model_name}


class ScriptedDaemon(LoopbackServer):
    """The daemon's real app (`build_app`) over a ScriptedEngine, on loopback; `url` is its base URL."""

    def __init__(self) -> None:
        self.engine = ScriptedEngine()
        host = EngineHost(lambda: self.engine)
        host.engine = self.engine
        super().__init__(build_app(host), "scripted daemon")
