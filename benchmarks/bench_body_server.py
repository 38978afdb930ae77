"""An empty function body's suggestion as the language server makes it, at each setting of the
multi-line unsure gate (`multilineMinTokenProb`), side by side.

bench_block_stop.py asks the engine directly; this goes the server's way. The document
(`--language python`): a standard-library module with one function's body removed
(bench_block_stop.body_holes: up to 3,000 characters before the body, 2,000 after), the cursor
on the body's first line after its indentation; (`--language javascript`) an npm source file
with one function's body removed, its closing brace kept (bench_js_body.js_bodies). Per hole
and arm: plan_completion there (the server's windows, code-first bans, dedent and loop stops,
line cap and, per arm, the gate), the engine's fill (the context cached
first, as on a keystroke), shape_fill (the server's shaping: an unsure fill's complete lines,
trimmed or dropped where the function would not parse). Per arm: suggestions shown, of which
cut short by the gate; fills hidden by it; lines shown that stand in the real body (8 or more
characters); shown suggestions that parse (Python: the function alone, by `ast`; JavaScript:
the file with the suggestion inserted has no more tree-sitter errors than without it); passes
per fill; latency p50 / p95.

    python benchmarks/bench_body_server.py [--language python|javascript] [--holes 60] [--seed 3]
        [--floors 0,0.15] [--choose-end on|off|off,on] [--threads 2]

`--choose-end off,on` runs each floor with and without the engine's choice of where a fill
ends (Hole.choose_end, fill_end.py), side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "engine"), str(ROOT / "kernels")]

from _bench_common import cpu_name, pct  # noqa: E402
from bench_block_stop import body_holes, parses, right_lines  # noqa: E402
from bench_js_body import js_bodies  # noqa: E402


def documents(language: str, count: int, seed: int) -> list[tuple[str, int, str]]:
    """(document text with a body removed, the cursor's offset, the real body)."""
    if language == "python":
        return [(prefix + suffix, len(prefix), real) for prefix, suffix, _indent, real in body_holes(count, seed)]
    return [(text, offset, real) for _uri, text, offset, real in js_bodies(count, seed)]


def error_nodes(node) -> int:
    return (node.type == "ERROR" or node.is_missing) + sum(error_nodes(c) for c in node.children)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--language", choices=("python", "javascript"), default="python")
    ap.add_argument("--holes", type=int, default=60)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--floors", default="0,0.15", help="the multilineMinTokenProb settings compared (0: off)")
    ap.add_argument("--choose-end", default="on", help="Hole.choose_end settings compared: on, off or off,on")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import dataclasses

    from lsprotocol import types

    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import InfillRequest
    from dllm_lsp.server.documents import DocumentStore
    from dllm_lsp.server.infill import plan_completion, request_for, shape_fill
    from dllm_lsp.server.options import parse_options
    from dllm_lsp.syntax.languages import language_named, parse

    ends = [{"on": True, "off": False}[c] for c in args.choose_end.split(",")]
    floors = [(float(f), c) for f in args.floors.split(",") for c in ends]  # an arm: (gate floor, choose_end)
    settings = {}
    for floor, c in floors:
        # nearTokens 0: the whole window, cached (no near reading of a new place: near_context.py)
        options, errors = parse_options({"multilineMinTokenProb": floor, "context": {"nearTokens": 0}})
        assert not errors, errors
        settings[floor, c] = options
    stats = {f: {"ms": [], "passes": 0, "shown": 0, "cut": 0, "hidden": 0, "right": 0, "lines": 0, "parse": 0,
                 "texts": []} for f in floors}
    holes = documents(args.language, args.holes, args.seed)
    spec = language_named(args.language)
    engine = Engine(EngineConfig(model="default", threads=args.threads))
    planned = 0
    try:
        for i, (text, offset, real) in enumerate(holes):
            suffix_ext = "py" if args.language == "python" else "js"
            doc = DocumentStore().open(types.TextDocumentItem(uri=f"file:///bench/body{i}.{suffix_ext}",
                                                              language_id=args.language, version=1, text=text))
            plans = {f: plan_completion(doc, offset, settings[f], {}) for f in floors}
            if any(p is None for p in plans.values()):
                continue  # no completion belongs there (the server answers nothing at once)
            planned += 1
            first = plans[floors[0]].hole
            warm = dataclasses.replace(first, max_tokens=1, bucket=None, min_token_prob=None)
            engine.infill(InfillRequest(holes=[warm]))  # the context cached, as on a keystroke
            for f in floors:
                plan, s = plans[f], stats[f]
                t0 = time.perf_counter()
                hole = dataclasses.replace(plan.hole, choose_end=f[1])
                fill = engine.infill(request_for([hole], settings[f])).holes[0]
                s["ms"].append((time.perf_counter() - t0) * 1000)
                s["passes"] += fill.passes
                suggestion = shape_fill(plan, fill)
                shown = suggestion.text if suggestion is not None else ""
                s["texts"].append(shown)
                if fill.finish_reason == "unsure":
                    s["cut" if shown else "hidden"] += 1
                if shown:
                    s["shown"] += 1
                    if args.language == "python":
                        s["parse"] += parses(text[:offset], shown)
                    else:
                        filled = text[:offset] + shown + text[suggestion.replace_end:]
                        before = error_nodes(parse(text, spec).root_node)
                        s["parse"] += error_nodes(parse(filled, spec).root_node) <= before
                right, lines = right_lines(shown, real)
                s["right"] += right
                s["lines"] += lines
    finally:
        engine.shutdown()
    where = "the standard library" if args.language == "python" else "npm's JavaScript"
    head = (f"{cpu_name()}, {args.threads} threads, default model ({engine.weights} weights), {planned} empty "
            f"function bodies of {where} (seed {args.seed}), the server's plan and shaping")
    rows = []
    for f in floors:
        s = stats[f]
        same = sum(a == b for a, b in zip(stats[floors[0]]["texts"], s["texts"]))
        rows.append({"multilineMinTokenProb": f[0], "choose_end": f[1], "shown": s["shown"], "cut": s["cut"], "hidden": s["hidden"],
                     "right_lines": s["right"], "lines_shown": s["lines"], "shown_that_parse": s["parse"],
                     "same_as_first": same, "passes_per_fill": round(s["passes"] / max(1, planned), 1),
                     "p50_ms": round(statistics.median(s["ms"]), 0) if s["ms"] else None,
                     "p95_ms": round(pct(s["ms"], 0.95), 0) if s["ms"] else None})
    if args.json:
        print(json.dumps({"machine": head, "rows": rows}, indent=1))
        return 0
    print(head)
    print("| multilineMinTokenProb | choose_end | suggestions shown | of which cut short | hidden | lines shown that stand in "
          "the real body | shown that parse | same as the first arm | passes/fill | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['multilineMinTokenProb'] or 'off'} | {'on' if r['choose_end'] else 'off'} | {r['shown']}/{planned} | {r['cut']} | {r['hidden']} "
              f"| {r['right_lines']} of {r['lines_shown']} | {r['shown_that_parse']}/{r['shown']} "
              f"| {r['same_as_first']}/{planned} | {r['passes_per_fill']} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
