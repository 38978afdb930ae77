"""The cost of choosing where a multi-line fill ends (`Hole.choose_end`, fill_end.py): the
scoring of a fill's line cuts, on this CPU, for the engine of this checkout or another.

Holes of a few lines cut from this repository's own source (a function body's next lines
removed, the cursor at the start of the first), filled by the default model with its end left
alone (`choose_end=False`, so every engine writes the same fills); then each fill's cuts are
scored as choose_end scores them (candidate_scoring.score_fills, on the engine thread, the
hole's context cached from the fill, as after a fill), `--repeats` times. Reports the median
and p95 scoring time per fill, the cuts read, and the cut each fill keeps with its scores (to
compare engines: the same cuts should win).

    python benchmarks/bench_fill_end.py [--holes 30] [--max-tokens 64] [--threads 2] [--engine-from ../other-checkout]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from _bench_common import cpu_name, pct, sources_at

ROOT = Path(__file__).resolve().parents[1]


def cut_holes(count: int, seed: int, rev: str | None = None) -> list[tuple[str, str]]:
    """(prefix, suffix): 2-6 lines of an indented block removed from dllm_lsp/'s source (at
    commit `rev` when given), the cursor at the start of the first (its indentation typed), the
    suffix from the next line on."""
    with sources_at(ROOT, rev, ["dllm_lsp"]) as root:
        return _cut(root, count, seed)


def _cut(root: Path, count: int, seed: int) -> list[tuple[str, str]]:
    holes = []
    for path in sorted((root / "dllm_lsp").rglob("*.py")):
        lines = path.read_text().splitlines(keepends=True)
        for i in range(5, len(lines) - 8):
            line = lines[i]
            indent = line[: len(line) - len(line.lstrip())]
            if not indent or not line.strip() or line.lstrip().startswith(("#", '"""')):
                continue
            n = 2 + (i % 5)
            if any(not ln.startswith(indent) for ln in lines[i:i + n] if ln.strip()):
                continue
            holes.append(("".join(lines[:i]) + indent, "".join(lines[i + n:])))
    random.Random(seed).shuffle(holes)
    return holes[:count]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--holes", type=int, default=30)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rev", help="draw the holes from this commit's code (the same sample on any checkout)")
    p.add_argument("--engine-from", type=Path, default=ROOT,
                   help="a checkout whose engine is measured (another commit's, on this checkout's holes)")
    args = p.parse_args()
    sys.path[:0] = [str(args.engine_from / "engine"), str(args.engine_from / "kernels")]
    from dllm_engine.candidate_scoring import score_fills
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.fill_end import cuts_for
    from dllm_engine.protocol import Hole, InfillRequest

    engine = Engine(EngineConfig(model="default", threads=args.threads))
    rows = []
    for prefix, suffix in cut_holes(args.holes, args.seed, args.rev):
        hole = Hole(prefix=prefix, suffix=suffix, max_tokens=args.max_tokens, choose_end=False)
        fill = engine.infill(InfillRequest(holes=[hole])).holes[0]
        cuts = cuts_for(Hole(prefix=prefix, suffix=suffix, max_tokens=args.max_tokens), fill)
        if not cuts:
            continue
        times, scores = [], None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            scores = engine.between_passes(lambda: score_fills(engine, prefix, suffix, cuts, args.max_tokens))
            times.append((time.perf_counter() - t0) * 1000)
        kept = max(range(len(cuts)), key=lambda i: (scores[i], -i))
        rows.append({"cuts": len(cuts), "fill_chars": len(fill.text), "ms": statistics.median(times),
                     "kept": kept, "scores": [round(s, 3) for s in scores]})
    engine.shutdown()
    ms = [r["ms"] for r in rows]
    print(json.dumps({"cpu": cpu_name(), "engine_from": str(args.engine_from), "threads": args.threads,
                      "max_tokens": args.max_tokens, "fills_scored": len(rows),
                      "median_ms": statistics.median(ms) if ms else None, "p95_ms": pct(ms, 0.95) if ms else None,
                      "mean_cuts": statistics.mean(r["cuts"] for r in rows) if rows else None,
                      "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
