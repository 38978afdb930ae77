"""Best of N: each hole filled several ways in one batch, the best-read fill kept.

A request with `params.candidates` N > 1 runs as N copies of each hole, side by side in the
same passes: copy 0 is the request's own fill (greedy by default, exactly the fill without
best of N); copies 1..N-1 are branches where the code after the hole names something the
fill may be about (branches.py: the copy's prefix gets that name, and the copy's fill
continues it greedily), and samples at CANDIDATE_TEMPERATURE with their own seeds for the
copies left over. When all
are done, one causal pass scores each distinct fill with the code after it
(candidate_scoring.py) and the highest wins; ties and any failure keep copy 0. A hole whose
copies ran out of time keeps copy 0 unscored; a sample still running well after copy 0
finished is cut (`outlasted`) and does not compete, so best of N costs a bounded number of
passes over the plain fill.

Why: a small pretrained base in our layout reads the suffix but barely uses it (HumanEval
single-line: 31.4% with the suffix, 29.5% without). Its own left-to-right judgement of
"fill + next line" does use it: a fill that the next line contradicts scores low.
"""

from __future__ import annotations

import dataclasses
import logging

from .branches import branch_prefix, branch_words
from .candidate_scoring import score_fills
from .fill_end import end_candidates
from .protocol import Hole, HoleResult, InfillRequest

log = logging.getLogger("dllm_engine")

CANDIDATE_TEMPERATURE = 0.8  # the samples beside the greedy fill: varied, still mostly code
# A sample still running this long after copy 0 finished is cut and does not compete: the
# request waits at most this for its samples (they check their drafts with draws, drafting.py,
# but draws agree with a draft less often than the greedy choice does).
SAMPLE_PASSES_FACTOR, SAMPLE_PASSES_SLACK = 1.5, 2


def expand(request: InfillRequest, n: int) -> InfillRequest:
    """The request the scheduler runs: hole i's copies at indices i*n .. i*n + n-1; copies
    1.. start with the hole's branch words (as typed into their prefix), then plain copies."""
    holes = []
    for h in request.holes:
        words = branch_words(h.prefix, h.suffix, n - 1) if request.params.temperature == 0 else []
        holes.append(h)
        holes += [dataclasses.replace(h, prefix=branch_prefix(h.prefix, w)) for w in words]
        holes += [h] * (n - 1 - len(words))
    return dataclasses.replace(request, holes=holes)


def branch_text(original: Hole, copy: Hole) -> str:
    """What a copy's prefix has beyond the caller's hole's (a branch's typed name; "" for a plain copy)."""
    return copy.prefix[len(original.prefix):]


def sampling_for(index: int, n: int, temperature: float, branch: bool = False) -> float:
    """The temperature copy `index` of an expanded request samples at (the request's own for
    copy 0 and for a branch, which continues its name as the request would)."""
    if n <= 1 or index % n == 0 or temperature > 0 or branch:
        return temperature
    return CANDIDATE_TEMPERATURE


def outlasted(active) -> bool:
    """Whether this copy (an ActiveHole) ran past its allowance after its copy 0 finished."""
    n = active.state.candidates
    if n <= 1 or active.index % n == 0:
        return False
    first = active.state.results[active.index - active.index % n]
    return first is not None and active.passes >= SAMPLE_PASSES_FACTOR * first.passes + SAMPLE_PASSES_SLACK


def choose(engine, holes: list[Hole], results: list[HoleResult], n: int, copies: list[Hole]) -> list[HoleResult]:
    """One result per original hole from its n copies' results (`copies`: the expanded
    request's holes; a branch's fill gets its typed name back in front)."""
    out = []
    for i, hole in enumerate(holes):
        group = [r if r is None or not branch_text(hole, c) else dataclasses.replace(r, text=branch_text(hole, c) + r.text)
                 for r, c in zip(results[i * n:(i + 1) * n], copies[i * n:(i + 1) * n])]
        out.append(_best(engine, hole, group))
    return out


def _best(engine, hole: Hole, group: list[HoleResult]) -> HoleResult:
    passes = max(r.passes for r in group)  # the copies ran side by side: the hole waited for the slowest
    if any(r.finish_reason == "deadline" for r in group):
        return dataclasses.replace(group[0], passes=passes)
    # Copy 0 always competes; a sample unless it was cut ("cancelled": engine.py, `outlasted`).
    fills = [group[0]] + [r for r in group[1:] if r.finish_reason != "cancelled"]
    # Each fill cut at its line breaks too where the hole's end is chosen (fill_end.py): one pass reads all.
    options = end_candidates(hole, fills)
    if len(options) == 1:
        return dataclasses.replace(group[0], passes=passes)
    try:
        scores = score_fills(engine, hole.prefix, hole.suffix, [text for text, _ in options], hole.max_tokens)
    except Exception:  # a fill is still an answer: keep the request's own
        log.exception("scoring %d candidate fills failed; keeping the first", len(options))
        return dataclasses.replace(group[0], passes=passes)
    order = sorted(range(len(options)), key=lambda i: (-scores[i], i))  # best first; a tie keeps the earlier
    text, source = options[order[0]]
    chosen = fills[source]
    best_cut: dict[int, str] = {}  # each fill's best-read cut, best first
    for i in order:
        best_cut.setdefault(options[i][1], options[i][0])
    return dataclasses.replace(chosen, text=text, passes=passes + 1,  # + the scoring pass
                               finish_reason=chosen.finish_reason if text == chosen.text else "end",
                               alternatives=[cut for f, cut in best_cut.items() if f != source])
