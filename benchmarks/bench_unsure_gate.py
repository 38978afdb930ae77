"""Single-line suggestions with and without the unsure gate (`Hole.min_token_prob`), side by side.

Held-out holes cut from this repository's own source (code written after the base was trained;
never HumanEval), two kinds: a whole line with the cursor after its indentation ("start"), and
the rest of a line with the cursor at a random place inside it ("mid", as while typing). Each
hole is filled once per arm by the same engine (the shipped decoding: its default weights and
drafts), the context cached first (as on a keystroke), arms interleaved per hole. Per arm and
kind: fills shown (not empty, not ended unsure), of which right (the exact rest of the line)
or a right start (a non-empty prefix of it: accepting it is still right), and wrong; precision;
passes per fill; latency p50 / p95 over every answer.

    python benchmarks/bench_unsure_gate.py [--holes 150] [--seed 31] [--floors 0.1,0.15,0.2] [--threads 2] [--rev COMMIT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels")]

from _bench_common import cpu_name, pct  # noqa: E402
from bench_default_decoding import cut_holes  # noqa: E402


def holes_of(kind: str, count: int, seed: int, rev: str | None = None) -> list[tuple[str, str, str]]:
    """(prefix, suffix, the rest of the line) for `kind` "start" or "mid"."""
    out = []
    rng = random.Random(seed + 1)
    for prefix, suffix, line in cut_holes(count, seed, rev):
        if kind == "mid":
            k = rng.randint(1, len(line) - 3)
            prefix, line = prefix + line[:k], line[k:]
        out.append((prefix, suffix, line.strip()))
    return out


def judge(text: str, reason: str, line: str) -> str:
    shown = text.strip()
    if reason == "unsure" or not shown:
        return "hidden"
    if shown == line:
        return "right"
    return "right start" if line.startswith(shown) else "wrong"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holes", type=int, default=150, help="per kind")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--floors", default="0.1,0.15,0.2", help="the gated arms' min_token_prob")
    ap.add_argument("--kinds", default="start,mid")
    ap.add_argument("--rev", help="draw the lines from this commit's code (the same sample on any checkout)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    arms: list[float | None] = [None, *(float(f) for f in args.floors.split(","))]
    engine = Engine(EngineConfig(model="default", threads=args.threads))
    rows = []
    try:
        for kind in args.kinds.split(","):
            stats = {arm: {"ms": [], "passes": 0, "hidden": 0, "right": 0, "right start": 0, "wrong": 0} for arm in arms}
            holes = holes_of(kind, args.holes, args.seed, args.rev)
            for prefix, suffix, line in holes:
                engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=1)]))  # cache the context
                for arm in arms:
                    hole = Hole(prefix=prefix, suffix=suffix, max_tokens=64, stop=("\n",), min_token_prob=arm)
                    t0 = time.perf_counter()
                    h = engine.infill(InfillRequest(holes=[hole])).holes[0]
                    s = stats[arm]
                    s["ms"].append((time.perf_counter() - t0) * 1000)
                    s["passes"] += h.passes
                    s[judge(h.text, h.finish_reason, line)] += 1
            for arm in arms:
                s = stats[arm]
                shown = s["right"] + s["right start"] + s["wrong"]
                rows.append({"kind": kind, "min_token_prob": arm, "holes": len(holes), "shown": shown,
                             "right": s["right"], "right_start": s["right start"], "wrong": s["wrong"],
                             "precision": round((s["right"] + s["right start"]) / max(1, shown), 3),
                             "passes_per_fill": round(s["passes"] / len(holes), 2),
                             "p50_ms": round(statistics.median(s["ms"]), 1), "p95_ms": round(pct(s["ms"], 0.95), 1)})
    finally:
        engine.shutdown()
    head = f"{cpu_name()}, {args.threads} threads, default model ({engine.weights} weights, {engine.config.draft_tokens} drafts)"
    if args.json:
        print(json.dumps({"machine": head, "rows": rows}, indent=1))
        return 0
    print(head)
    print("| kind | min_token_prob | shown | right | right start | wrong | precision | passes/fill | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kind']} | {r['min_token_prob'] or 'off'} | {r['shown']}/{r['holes']} | {r['right']} | {r['right_start']} "
              f"| {r['wrong']} | {r['precision']} | {r['passes_per_fill']} | {r['p50_ms']} | {r['p95_ms']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
