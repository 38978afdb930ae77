"""Apply edit's open spots decided by the diffusion model (apply_edit.py plans the merge).

At a spot the alignment has several ways to merge (`Option`s, each made only of original
and snippet lines). The model is asked what belongs there: each option's region becomes a
masked hole with the merged code around it as context (an anchor's placements are holes
at different places; a seam's options share one hole), all holes of a spot are denoised
in one batched engine request, and the option whose text is nearest to what the model
wrote there (difflib ratio) is taken; a tie keeps the alignment's guess. So the model
decides the merge where the alignment cannot, and no code it invents enters the file.

Runs in a worker thread (the engine calls block); a client that goes away sets `cancel`,
which drops the engine request.
"""

from __future__ import annotations

import difflib
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from ..protocol import DiffusionParams, Hole, InfillRequest, RequestCancelled
from .apply_edit import Spot, apply_edit

# Context each hole sees: the merged code around the region, cut at line starts.
PREFIX_CHARS, SUFFIX_CHARS = 1200, 600
SLACK_TOKENS = 8  # the fill may run a little longer than the longest option
# Spots asked per merge: each is one engine request, one after the other (a later spot's context
# holds the earlier answers). Past this the alignment's guess stands, so a snippet of many
# ambiguous `}` lines costs a bounded time.
MAX_DECISIONS = 8
POLL_S = 0.05


@dataclass
class ModelDecider:
    engine: object
    cancel: threading.Event | None = None
    params: DiffusionParams = field(default_factory=DiffusionParams)
    decisions: list[dict] = field(default_factory=list)  # what was asked and answered, for the response

    def __call__(self, spot: Spot) -> int:
        if len(self.decisions) >= MAX_DECISIONS:
            return 0
        contexts = list(dict.fromkeys((o.prefix, o.suffix) for o in spot.options))
        longest = max(len(self.engine.tokenizer.encode(o.text)) for o in spot.options)
        max_tokens = min(1024, longest + SLACK_TOKENS)
        holes = [Hole(prefix=_tail(prefix), suffix=_head(suffix), max_tokens=max_tokens) for prefix, suffix in contexts]
        fills = self._denoise(holes)
        by_context = dict(zip(contexts, fills))
        scores = [_nearness(by_context[(o.prefix, o.suffix)], o.text) for o in spot.options]
        chosen = max(range(len(scores)), key=lambda i: (scores[i], -i))
        self.decisions.append({"kind": spot.kind, "line": spot.line + 1, "options": len(spot.options),
                               "chosen": chosen, "fills": fills})
        return chosen

    def _denoise(self, holes: list[Hole]) -> list[str]:
        req = InfillRequest(holes=holes, params=self.params)
        req.validate()
        handle = self.engine.submit(req)
        while True:
            if self.cancel is not None and self.cancel.is_set():
                handle.cancel()
                raise RequestCancelled("apply-edit request cancelled")
            try:
                return [h.text for h in handle.result(timeout=POLL_S).holes]
            except FutureTimeout:
                continue


def merge_with_model(engine, original: str, snippet: str, cancel: threading.Event | None = None,
                     params: DiffusionParams | None = None) -> tuple[str, list[dict]]:
    """The merged code, and the spots the model decided (empty when the alignment settled all)."""
    decider = ModelDecider(engine, cancel, params or DiffusionParams())
    return apply_edit(original, snippet, decide=decider), decider.decisions


def _nearness(fill: str, text: str) -> float:
    return difflib.SequenceMatcher(None, fill.strip(), text.strip(), autojunk=False).ratio()


def _tail(text: str) -> str:
    if len(text) <= PREFIX_CHARS:
        return text
    cut = text[-PREFIX_CHARS:]
    return cut[cut.find("\n") + 1:] if "\n" in cut else cut


def _head(text: str) -> str:
    if len(text) <= SUFFIX_CHARS:
        return text
    cut = text[:SUFFIX_CHARS]
    return cut[:cut.rfind("\n") + 1] if "\n" in cut else cut
