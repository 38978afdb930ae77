"""Where a fill becomes a guess: `Hole.min_token_prob`'s rule.

Why: a small base's wrong suggestions are mostly the ones it was unsure of somewhere. On 300
held-out mid-line holes of this repository's own source (the default model, greedy), the
smallest probability of a fill's tokens told right fills from wrong ones with an AUC of 0.90;
with the shipped decoding, ending the fills with a token under 0.15 hid 54 of 119 wrong
mid-line suggestions and 1 of 31 right ones, and 59 of 129 wrong whole lines and none of the 9
right ones (benchmarks/bench_unsure_gate.py; RESULTS.md, twenty-first session). A fill that will be hidden need not be
finished: it ends at the pass that commits that token, so its remaining passes are never run.

The slot counted is any slot committed this pass up to and including the fill's end (the end
or stop token that ends it: a model unsure where the line ends is unsure of the line); slots
after the end, which a draft may have filled in the same pass, are not the fill's.
"""

from __future__ import annotations

import torch


def unsure_slot(committed: torch.Tensor, probs: torch.Tensor, ends: torch.Tensor, floor: float) -> int | None:
    """The first slot of one canvas committed this pass with probability under `floor`, when
    no end or stop token comes before it; else None.

    committed: bool [L], the slots committed this pass; probs: float [L], the probability the
    model gave each committed slot's token; ends: bool [L], slots holding an end or stop token."""
    low = committed & (probs < floor)
    if not bool(low.any()):
        return None
    first = int(low.nonzero()[0])
    return None if bool(ends[:first].any()) else first
