"""Multi-line fills at the start of a block under the engine's stop rules (none, Hole.stop_indent, and Hole.stop_repeats), side by side.

Holes: the first line of the body of an `if` / `for` / `while` / `with` in the standard
library (the cursor on that line after its indentation, the rest of the file as suffix), as
the language server's multi-line completion asks for them (64 tokens, no stop string). For each
hole every arm fills it in turn, with the context cached (a keystroke's case): per arm, the
tokens the engine wrote, the tokens left after shaping's dedent and loop cuts (dedent_stop.py's
and repeat_stop.py's rules, the same for every arm), passes and latency (median, p95). Arms:
`free` (no stop rule), `stop_indent` (the dedent stop), `stop_repeats` (it and the loop stop,
as the language server asks).

    python benchmarks/bench_block_stop.py [--holes 24] [--threads 2] [--seed 0] [--arms free,stop_indent,stop_repeats]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import sysconfig
import time
from pathlib import Path

from _bench_common import cpu_name, pct

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels")]
OPENER = re.compile(r"\s+(if|for|while|with) .*:$")


def block_holes(count: int, seed: int) -> list[tuple[str, str, int]]:
    """(prefix, suffix, indent): the cursor after the indentation of a block's first body line."""
    holes = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        for i, line in enumerate(lines[:-2]):
            body = lines[i + 1]
            indent = len(line) - len(line.lstrip()) + 4
            if OPENER.match(line) and len(body) - len(body.lstrip()) == indent and body.strip():
                prefix = "\n".join(lines[:i + 1]) + "\n" + " " * indent
                holes.append((prefix[-3000:], ("\n" + "\n".join(lines[i + 2:]))[:2000], indent))
    random.Random(seed).shuffle(holes)
    return holes[:count]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--holes", type=int, default=24)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", default="free,stop_indent,stop_repeats",
                   help="free: no stop rule; stop_indent: the dedent stop; stop_repeats: it and the loop stop")
    args = p.parse_args()
    from dllm_engine.dedent_stop import dedent_cut
    from dllm_engine.repeat_stop import repeat_cut, typed_indent
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    engine = Engine(EngineConfig(model="default", threads=args.threads))
    def kept_text(text: str, indent: int, typed: str) -> str:
        """What the editor keeps of a fill: shaping's dedent cut, then its loop cut."""
        cut = dedent_cut(text, indent)
        text = text[:cut] if cut >= 0 else text
        cut = repeat_cut(text, typed, final=True)
        return text[:cut] if cut >= 0 else text

    holes = block_holes(args.holes, args.seed)
    arms = args.arms.split(",")
    stats = {arm: {"ms": [], "passes": 0, "tokens": 0, "kept": 0, "texts": []} for arm in arms}
    try:
        for prefix, suffix, indent in holes:
            for arm in arms:
                req = InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=64,
                                                stop_indent=None if arm == "free" else indent,
                                                stop_repeats=arm == "stop_repeats")])
                engine.infill(req)  # the context cached, as on a keystroke
                t0 = time.perf_counter()
                h = engine.infill(req).holes[0]
                s = stats[arm]
                s["ms"].append((time.perf_counter() - t0) * 1000)
                s["passes"] += h.passes
                s["tokens"] += h.tokens
                s["texts"].append(kept := kept_text(h.text, indent, typed_indent(prefix)))
                s["kept"] += len(engine.tokenizer.encode(kept))
    finally:
        engine.shutdown()
    first = stats[arms[0]]["texts"]
    print(f"{cpu_name()}, {args.threads} threads, {len(holes)} block-start holes of the standard library, 64 tokens")
    print(f"| arm | p50 ms | p95 ms | passes/fill | tokens written/fill | tokens kept by the editor's cuts/fill | same kept text as {arms[0]} |")
    print("|---|---|---|---|---|---|---|")
    for arm, s in stats.items():
        n = len(holes)
        same = sum(a == b for a, b in zip(first, s["texts"]))
        print(f"| {arm} | {statistics.median(s['ms']):.0f} | {pct(s['ms'], 0.95):.0f} | {s['passes'] / n:.1f} "
              f"| {s['tokens'] / n:.1f} | {s['kept'] / n:.1f} | {same}/{n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
