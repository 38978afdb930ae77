"""Held-out exact match through the language server's own windows, with the prefix window's start on its quarter-budget grid (now) and at the exact budget (before), side by side.

Holes: single lines of this repository's own source (dllm_lsp/, written after the default
model's base was trained), deep enough in their file that the prefix window is cut by its
budget (the case the grid changes); the line's text is removed, the cursor left after its
indentation, the rest of the file kept after it. Each hole goes the server's whole way:
`plan_completion` (context kind, windows, snippets, stop rules), the default model in process,
`shape` (what the editor would show). Arms are interleaved per hole, the engine's context
cache cleared before each fill (each arm pays its own encode). Reported per arm: exact match
(the suggestion is the removed line), suggestions shown, and the prefix characters the window
kept.

    python benchmarks/bench_window_quality.py [--holes 60] [--seed 0] [--threads 2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

from _bench_common import cpu_name

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels")]
DEEP = 4000  # characters before the hole: past the default prefix budget (768 tokens, ~2,460 characters)


def line_holes(count: int, seed: int) -> list[tuple[str, str, int, str]]:
    """(uri, document with the line's text removed, cursor offset, the removed text)."""
    holes = []
    for path in sorted((ROOT / "dllm_lsp").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        start = 0
        for line in text.split("\n"):
            body = line.strip()
            if (start > DEEP and 8 <= len(body) <= 100 and not body.startswith(("#", '"', "'", ")", "]", "}"))
                    and not body.endswith((":", "(", "[", "{", ","))):
                at = start + len(line) - len(line.lstrip())
                doc = text[:at] + text[at + len(body):]
                holes.append((path.as_uri(), doc, at, body))
            start += len(line) + 1
    random.Random(seed).shuffle(holes)
    return holes[:count]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--holes", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    from lsprotocol import types

    from dllm_engine.engine import Engine, EngineConfig
    from dllm_lsp.server.documents import DocumentStore
    from dllm_lsp.server.infill import plan_completion, request_for, shape
    from dllm_lsp.server.options import ServerOptions
    from dllm_lsp.syntax import windows

    on_grid = windows._on_grid
    arms = {"grid": on_grid, "exact budget": lambda offset, step: offset}
    engine = Engine(EngineConfig(model="default", threads=args.threads))
    options = ServerOptions()
    options.context.near_tokens = 0  # each arm reads its whole window: the window is what is measured
    stats = {arm: {"exact": 0, "shown": 0, "prefix": [], "asked": 0} for arm in arms}
    paired = {"grid won": 0, "grid lost": 0}  # holes one arm matched and the other did not
    holes = line_holes(args.holes, args.seed)
    try:
        for uri, doc_text, offset, real in holes:
            doc = DocumentStore().open(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=doc_text))
            hit = {}
            for arm, rule in arms.items():
                windows._on_grid = rule
                try:
                    plan = plan_completion(doc, offset, options, {})
                finally:
                    windows._on_grid = on_grid
                if plan is None:
                    continue
                s = stats[arm]
                s["asked"] += 1
                s["prefix"].append(len(plan.ctx.prefix))
                engine.drop_caches()  # each arm encodes its own context
                result = engine.infill(request_for([plan.hole], options))
                suggestion = shape(plan, result.holes[0].text)
                hit[arm] = suggestion is not None and suggestion.text.split("\n")[0].strip() == real
                s["shown"] += suggestion is not None
                s["exact"] += hit[arm]
            if len(hit) == 2 and hit["grid"] != hit["exact budget"]:
                paired["grid won" if hit["grid"] else "grid lost"] += 1
    finally:
        engine.shutdown()
    print(f"{cpu_name()}, {args.threads} threads, {len(holes)} held-out lines of dllm_lsp/ (seed {args.seed}), "
          f"more than {DEEP} characters into their file")
    print("| prefix window start | asked | exact match | suggestions shown | prefix characters kept, median |")
    print("|---|---|---|---|---|")
    for arm, s in stats.items():
        n = max(1, s["asked"])
        print(f"| {arm} | {s['asked']} | {s['exact']} ({100 * s['exact'] / n:.1f}%) | {s['shown']} "
              f"| {statistics.median(s['prefix']) if s['prefix'] else 0:.0f} |")
    print(f"paired: the grid matched {paired['grid won']} holes the exact budget missed, missed {paired['grid lost']} it matched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
