"""An empty JavaScript function body's fill, as the language server plans and shapes it: the
engine's dedent stop (`Hole.stop_indent`, `LanguageSpec.dedent_ends_block`) off and on.

Bodies: functions of npm's own sources (/usr/lib/node_modules/npm, never HumanEval), one per
file, the body removed and the cursor on its first line after the indentation, the closing
brace kept below it (as an editor's auto-close leaves it). Each body is planned by the server's
own `plan_completion` (the default settings: a multi-line suggestion at an empty body, at most 4
lines) and filled by the default model in process with the context cached (a keystroke's
case), once per arm, the arms' order alternating; the fill is shaped by the server's own
`shape`. Per arm: latency p50 / p95, passes, suggestions shown, and whether the shown text is
the same in both arms. Also counted: fills that begin with a comment (`//`, `/*`), what the
server's `emptyBody: "code"` would ban if JavaScript had prose starts.

    python benchmarks/bench_js_body.py [--bodies 30] [--seed 0] [--threads 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

from _bench_common import cpu_name, pct

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "engine"), str(ROOT / "kernels")]
SOURCES = Path("/usr/lib/node_modules/npm")
OPENER = re.compile(r"^(\s*)(async\s+)?function\s*\w*\s*\([^)]*\)\s*\{\s*$|^(\s*)\w+\s*\([^)]*\)\s*\{\s*$")


def js_bodies(count: int, seed: int) -> list[tuple[str, str, int, str]]:
    """(uri, text with the body removed, the cursor's offset, the real body)."""
    files = sorted(SOURCES.rglob("*.js"))
    random.Random(seed).shuffle(files)
    bodies = []
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        for i, line in enumerate(lines[:-3]):
            if not OPENER.match(line) or not lines[i + 1].strip() or lines[i + 1].strip().startswith("}"):
                continue
            base = len(line) - len(line.lstrip())
            indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
            end = i + 1  # the closing brace at the opener's indentation
            while end < len(lines) and not (lines[end].startswith(" " * base + "}")
                                            and len(lines[end]) - len(lines[end].lstrip()) == base):
                end += 1
            if end >= len(lines) or end - i > 60:
                continue
            head = "\n".join(lines[:i + 1]) + "\n"
            text = head + " " * indent + "\n" + "\n".join(lines[end:])
            bodies.append((path.as_uri(), text, len(head) + indent, "\n".join(lines[i + 1:end])))
            break
        if len(bodies) >= count:
            break
    return bodies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bodies", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from lsprotocol import types

    from dllm_engine.engine import Engine, EngineConfig
    from dllm_lsp.server.documents import DocumentStore
    from dllm_lsp.server.infill import plan_completion, request_for, shape
    from dllm_lsp.server.options import ServerOptions

    store, options = DocumentStore(), ServerOptions()
    options.context.near_tokens = 0  # the whole window, cached (no near reading: near_context.py)
    engine = Engine(EngineConfig(threads=args.threads))
    rows = []
    for n, (uri, text, offset, _) in enumerate(js_bodies(args.bodies, args.seed)):
        doc = store.open(types.TextDocumentItem(uri=uri, language_id="javascript", version=1, text=text))
        plan = plan_completion(doc, offset, options, {})
        if plan is None or plan.hole.stop_indent is None:
            continue
        arms = {"none": dataclasses.replace(plan.hole, stop_indent=None), "dedent": plan.hole}
        engine.infill(request_for([dataclasses.replace(plan.hole, max_tokens=1, bucket=None)], options))  # cached
        row = {}
        for arm in (["none", "dedent"] if n % 2 == 0 else ["dedent", "none"]):
            start = time.perf_counter()
            result = engine.infill(request_for([arms[arm]], options))
            ms = (time.perf_counter() - start) * 1000
            shaped = shape(plan, result.holes[0].text)
            row[arm] = {"ms": ms, "passes": result.passes, "shown": shaped.text if shaped else None,
                        "comment_first": result.holes[0].text.lstrip().startswith(("//", "/*"))}
        rows.append(row)
        if row["none"]["shown"] != row["dedent"]["shown"]:
            print(f"differs at {uri}:\n  none:   {row['none']['shown']!r}\n  dedent: {row['dedent']['shown']!r}",
                  file=sys.stderr)
    engine.shutdown()
    report = {"cpu": cpu_name(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "bodies": len(rows),
              "same_shown": sum(r["none"]["shown"] == r["dedent"]["shown"] for r in rows)}
    for arm in ("none", "dedent"):
        ms = [r[arm]["ms"] for r in rows]
        report[arm] = {"p50_ms": round(statistics.median(ms)), "p95_ms": round(pct(ms, 0.95)),
                       "passes_mean": round(statistics.fmean(r[arm]["passes"] for r in rows), 1),
                       "shown": sum(r[arm]["shown"] is not None for r in rows),
                       "comment_first": sum(r[arm]["comment_first"] for r in rows)}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
