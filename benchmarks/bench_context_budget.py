"""What a smaller context window costs and buys at a new cursor place: held-out exact match and the first answer's time, per prefix/suffix budget, side by side.

Why: on a CPU without AMX the first answer at a place the engine has not seen waits for that
place's whole context to be encoded (~1 ms a token on 2 AMD EPYC cores; 768 + 256 tokens by
default), and that wait is what sets the keystroke replay's single-line p95. A smaller window
encodes fewer tokens; what it loses is measured here on code the base never saw.

Holes: single lines of this repository's own source (bench_window_quality.line_holes: deep in
their file, so the prefix budget cuts the window), the line's text removed, the cursor after
its indentation. Each hole goes the server's whole way for a typed completion (`plan_completion`,
the unsure gate, `shape_fill`: what the editor would show) once per budget, arms interleaved, the
engine's context cache cleared before each (each arm pays its own encoding, as at a new place).
Reported per arm: exact match (the suggestion is the removed line), suggestions shown, wrong
suggestions shown, the fill's time from the request to the answer (encoding included), the
context's tokens, and the base's log-probability of the removed line under that window (a
measure of every hole: exact match moves on a few); paired against the first arm.

    python benchmarks/bench_context_budget.py [--budgets 768:256,512:128,384:128] [--holes 60] [--threads 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

from _bench_common import cpu_name
from bench_window_quality import line_holes

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budgets", default="768:256,512:128,384:128",
                   help="comma list of PREFIX:SUFFIX token budgets; the first is the baseline")
    p.add_argument("--holes", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    from lsprotocol import types

    from dllm_engine.candidate_scoring import score_fills
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_lsp.server.documents import DocumentStore
    from dllm_lsp.server.infill import plan_completion, request_for, shape_fill
    from dllm_lsp.server.options import ServerOptions

    base = ServerOptions()
    arms = {}
    for spec in args.budgets.split(","):
        if spec.startswith("near"):  # "near384": the default window, its first answer read near (Hole.near_tokens)
            arms[spec] = dataclasses.replace(base, context=dataclasses.replace(
                base.context, near_tokens=int(spec[4:])))
            continue
        prefix, _, suffix = spec.partition(":")
        # near_tokens 0: each arm reads its whole window, the budget being what is measured
        arms[spec] = dataclasses.replace(base, context=dataclasses.replace(
            base.context, prefix_tokens=int(prefix), suffix_tokens=int(suffix), near_tokens=0))
    first = next(iter(arms))
    stats = {arm: {"exact": 0, "shown": 0, "wrong": 0, "ms": [], "tokens": [], "asked": 0, "logp": []} for arm in arms}
    paired = {arm: [0, 0] for arm in arms}  # [matched where the baseline missed, missed where it matched]
    likelier = {arm: [0, 0] for arm in arms}  # [the removed line read likelier than under the baseline, less likely]
    holes = line_holes(args.holes, args.seed)
    engine = Engine(EngineConfig(model="default", threads=args.threads))
    try:
        # A warm-up fill: the first forward of each shape pays one-off costs no arm should.
        doc = DocumentStore().open(types.TextDocumentItem(uri=holes[0][0], language_id="python", version=1,
                                                          text=holes[0][1]))
        engine.infill(request_for([plan_completion(doc, holes[0][2], base, {}).hole], base))
        for uri, doc_text, offset, real in holes:
            doc = DocumentStore().open(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=doc_text))
            hit, logp = {}, {}
            for arm, options in arms.items():
                plan = plan_completion(doc, offset, options, {})
                if plan is None:
                    continue
                s = stats[arm]
                s["asked"] += 1
                engine.drop_caches()  # a new place: nothing of this context is cached, nothing caught up behind
                t0 = time.perf_counter()
                result = engine.infill(request_for([plan.hole], options))
                s["ms"].append((time.perf_counter() - t0) * 1000)
                s["tokens"].append(result.context_tokens)
                # The base's reading of the removed line under this window (log-probability, nats;
                # the context is cached from the fill): a measure of every hole, not only of
                # the few whose suggestion is shown and exactly right.
                hole = plan.hole
                if not arm.startswith("near"):  # (a near read's window is the engine's cut, not these texts)
                    logp[arm] = engine.between_passes(lambda: score_fills(
                        engine, hole.prefix, hole.suffix, [real], hole.max_tokens, suffix_tokens=0))[0]
                    s["logp"].append(logp[arm])
                suggestion = shape_fill(plan, result.holes[0])
                hit[arm] = suggestion is not None and suggestion.text.split("\n")[0].strip() == real
                s["shown"] += suggestion is not None
                s["exact"] += hit[arm]
                s["wrong"] += suggestion is not None and not hit[arm]
            for arm in arms:
                if arm != first and arm in hit and first in hit and hit[arm] != hit[first]:
                    paired[arm][0 if hit[arm] else 1] += 1
                if arm != first and arm in logp and first in logp:
                    likelier[arm][0 if logp[arm] > logp[first] else 1] += 1
    finally:
        engine.shutdown()
    print(f"{cpu_name()}, {args.threads} threads, {len(holes)} held-out lines of dllm_lsp/ (seed {args.seed}), "
          f"each a new place (context cache cleared)")
    print(f"| prefix:suffix tokens | asked | exact match | shown | wrong shown | context tokens, median "
          f"| first answer p50 / p95 ms | the line's log-probability, mean / median nats "
          f"| vs {first}: exact won / lost | read likelier / less likely |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for arm, s in stats.items():
        n = max(1, s["asked"])
        ms = sorted(s["ms"]) or [0.0]
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        logp = f"{statistics.fmean(s['logp']):.2f} / {statistics.median(s['logp']):.2f}" if s["logp"] else "-"
        print(f"| {arm} | {s['asked']} | {s['exact']} ({100 * s['exact'] / n:.1f}%) | {s['shown']} | {s['wrong']} "
              f"| {statistics.median(s['tokens']) if s['tokens'] else 0:.0f} | {statistics.median(ms):.0f} / {p95:.0f} "
              f"| {logp} "
              f"| {'' if arm == first else f'{paired[arm][0]} / {paired[arm][1]}'} "
              f"| {'' if arm == first or not s['logp'] else f'{likelier[arm][0]} / {likelier[arm][1]}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
