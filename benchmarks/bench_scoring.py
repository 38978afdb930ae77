"""The language server's suspicious-token diagnostics on the default model: latency and what they flag.

Names in this repository's own source (code the base never saw), each edited two ways: a
typo (a letter dropped or two swapped, as `totl` for `total`) and a wrong name (another name
the file uses). The region the server scores after such an edit (diagnostics.changed_region:
the edited line and three on each side, with 2,400 characters before and 1,200 after as
context) is scored edited and as written. What the server would show is
diagnostics.select() of diagnostics.suspicious_tokens(). Per arm: a region's scoring p50 /
p95, edits flagged (a hint on the edit) and given back (its quick fix writes the name that
was there), and false flags (hints on code as written: around the edit, and in the
unedited region); then the same counts over a grid of select()'s thresholds.

Arms, interleaved per name (one engine; the arm picks the scoring path):
- `masked`: every token masked once, a 4th of the span per canvas in one batched pass (the
  path before the twenty-fifth session for every model);
- `causal`: one causal pass over the span (scoring.py: the default path for a shifted-logit
  model decoded in blocks of 1).
With `--heads N`, file heads of 3,000 characters (what the server scores when a file opens,
~850-1,000 tokens) are scored by the causal path alone (the masked path refused spans over
512 tokens) and timed; with `--pastes N`, the region a pasted block of ~2,400 characters
halfway into a file makes (2,400 characters of code before it: every window after the first
runs past the model's context budget), likewise.

    python benchmarks/bench_scoring.py [--regions 40] [--heads 10] [--pastes 0] [--threads 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "engine", ROOT / "kernels", ROOT / "benchmarks"):
    sys.path.insert(0, str(p))

from _bench_common import cpu_name, pct  # noqa: E402
from dllm_lsp.server.diagnostics import (PREFIX_CHARS, REGION_MAX_CHARS, SUFFIX_CHARS,  # noqa: E402
                                         SuspiciousToken, changed_region, select, suspicious_tokens)

NAME = re.compile(r"\b[a-z_][a-z0-9_]{4,}\b")


def typo(name: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(name) - 1)
    if rng.random() < 0.5:
        return name[:i] + name[i + 1:]  # a letter dropped
    return name[:i] + name[i + 1] + name[i] + name[i + 2:] if name[i] != name[i + 1] else name[:i] + name[i + 1:]


@dataclass
class Case:
    clean: str  # a file of dllm_lsp/ as it is
    name: str  # the name that was edited
    edits: dict  # kind ("typo", "wrong name") -> (edited text, region the server scores, the edit's span)


def cases(count: int, seed: int) -> list[Case]:
    """Lines of dllm_lsp/ holding a name of 5+ letters that their file uses elsewhere; the name
    edited two ways: a typo (a letter dropped or two swapped), and a wrong name (another name of
    the file). Each edit's region is the one the server scores after it (changed_region)."""
    rng = random.Random(seed)
    texts = {path: path.read_text() for path in sorted((ROOT / "dllm_lsp").rglob("*.py"))}
    places = []
    for path, text in texts.items():
        lines = text.splitlines(keepends=True)
        names = sorted({m.group() for m in NAME.finditer(text) if text.count(m.group()) > 2})
        offset = 0
        for i, line in enumerate(lines):
            if 10 <= i < len(lines) - 5 and not line.strip().startswith("#"):
                places += [(path, offset + m.start(), m.group(), names) for m in NAME.finditer(line) if m.group() in names]
            offset += len(line)
    rng.shuffle(places)
    out = []
    for path, at, name, names in places[: count]:
        text = texts[path]
        edits = {}
        for kind, new in (("typo", typo(name, rng)), ("wrong name", rng.choice([n for n in names if n != name] or [name]))):
            edited = text[:at] + new + text[at + len(name):]
            region = changed_region(text, edited)
            if region is not None and new != name:
                edits[kind] = (edited, region, (at, at + len(new)))
        if len(edits) == 2:
            out.append(Case(text, name, edits))
    return out


def flags(engine, text: str, region: tuple[int, int]) -> tuple[list, list, float]:
    """Every candidate the server weighs (diagnostics.suspicious_tokens), every token as the server
    took them before the twenty-fifth session (blank ones too, no names), and the scoring's ms."""
    from dllm_engine.protocol import ScoreRequest

    start, end = region
    t0 = time.perf_counter()
    result = engine.score(ScoreRequest(prefix=text[max(0, start - PREFIX_CHARS):start], span=text[start:end],
                                       suffix=text[end:end + SUFFIX_CHARS], background=True))
    ms = (time.perf_counter() - t0) * 1000
    every = [SuspiciousToken(start + t.start, start + t.end, t.prob, t.alternative, t.alternative_prob)
             for t in result.tokens]
    return suspicious_tokens(result.tokens, start, text), every, ms


def count(found, typo_span: tuple[int, int], right: str = "") -> tuple[int, int, int]:
    """(1 if a flag is on the typo, 1 if one offers `right` for the whole typo, flags elsewhere)."""
    a, b = typo_span
    on = [t.start < b and t.end > a for t in found]
    fixed = any(t.start == a and t.end == b and t.alternative == right for t in found)
    return int(any(on)), int(fixed), on.count(False)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--regions", type=int, default=40)
    p.add_argument("--heads", type=int, default=10)
    p.add_argument("--pastes", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from dllm_engine import scoring
    from dllm_engine.engine import Engine, EngineConfig

    arms = {"masked": mock.patch.object(scoring, "reads_causally", lambda runner: False),
            "causal": mock.patch.object(scoring, "reads_causally", scoring.reads_causally)}
    engine = Engine(EngineConfig(model="default", threads=args.threads))
    cut = cases(args.regions, args.seed)
    kinds = ("typo", "wrong name")
    stats = {arm: {"ms": [], "scored": []} for arm in arms}
    try:
        flags(engine, cut[0].clean, cut[0].edits["typo"][1])  # warm-up
        before = {arm: {kind: [0, 0, 0] for kind in kinds} for arm in arms}
        for case in cut:
            for arm, patch in arms.items():
                s = stats[arm]
                with patch:
                    scored = {}
                    for kind in kinds:
                        edited, region, span = case.edits[kind]
                        found, every, ms = flags(engine, edited, region)
                        clean_found, clean_every, clean_ms = flags(engine, case.clean, region)
                        # the rule before: any token, any alternative, 0.01 / 0.5
                        old = count(select(every, 0.01, 0.5, 0.5), span, case.name)
                        for i, v in enumerate((old[0], old[1], len(select(clean_every, 0.01, 0.5, 0.5)))):
                            before[arm][kind][i] += v
                        s["ms"] += [ms, clean_ms]
                        scored[kind] = (found, clean_found, span)
                s["scored"].append((case.name, scored))
        heads = []
        for path in sorted((ROOT / "engine" / "dllm_engine").rglob("*.py"))[: args.heads * 3: 3]:
            text = path.read_text()
            if len(text) < REGION_MAX_CHARS:
                continue
            _, _, ms = flags(engine, text, changed_region(None, text))
            heads.append(ms)
        pastes = []
        for path in sorted((ROOT / "engine" / "dllm_engine").rglob("*.py")):
            text = path.read_text()
            if len(pastes) >= args.pastes or len(text) < 4 * REGION_MAX_CHARS:
                continue
            start = text.find("\n", len(text) // 2) + 1
            end = text.find("\n", start + 2400) + 1
            _, _, ms = flags(engine, text, changed_region(text[:start] + text[end:], text))
            pastes.append(ms)
    finally:
        engine.shutdown()

    def tally(s: dict, kind: str, thresholds=()) -> tuple[int, int, int, int]:
        """(edits flagged, flagged with the name given back, false flags around the edit, on the clean region)."""
        got = [count(select(found, *thresholds), span, name) + (len(select(clean, *thresholds)),)
               for name, scored in s["scored"] for found, clean, span in [scored[kind]]]
        return tuple(sum(g[i] for g in got) for i in range(4))

    rows = [{"arm": arm, "regions": len(cut), "p50_ms": round(statistics.median(s["ms"]), 1),
             "p95_ms": round(pct(s["ms"], 0.95), 1), **{kind: tally(s, kind) for kind in kinds}}
            for arm, s in stats.items()]
    head = (f"{cpu_name()}, {args.threads} threads, default model ({engine.weights} weights); {len(cut)} names (seed"
            f" {args.seed}), each region scored clean, with a typo and with a wrong name")
    if args.json:
        print(json.dumps({"machine": head, "rows": rows, "before": before, "heads_ms": heads, "pastes_ms": pastes},
                         indent=1))
        return 0
    print(head)
    print("| arm | p50 ms | p95 ms | typos flagged / given back | wrong names flagged / given back |"
          " false flags (typo'd, wrong-named, clean regions) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        t, w = r["typo"], r["wrong name"]
        print(f"| {r['arm']} | {r['p50_ms']} | {r['p95_ms']} | {t[0]} / {t[1]} of {r['regions']} | {w[0]} / {w[1]} "
              f"| {t[2]}, {w[2]}, {t[3]} |")
    for arm, b in before.items():
        t, w = b["typo"], b["wrong name"]
        print(f"| {arm}, the rule before (every token, any alternative, 0.01 / 0.5) | | | {t[0]} / {t[1]} | {w[0]} / {w[1]} "
              f"| -, -, {t[2]} |")
    print("\nselect()'s thresholds (max_probability, min_alternative (off: misspellings only), min_misspelling): typos flagged / given back,"
          " wrong names flagged / given back, false flags on the clean regions, per arm")
    grid = [(mp, ma, mm) for mp in (0.003, 0.01, 0.03) for ma in (0.5, 0.7, 0.9, None) for mm in (0.2, 0.3, 0.5)]
    print("| thresholds | " + " | ".join(stats) + " |")
    print("|---|" + "---|" * len(stats))
    for grid_point in grid:
        cells = []
        for s in stats.values():
            t, w = tally(s, "typo", grid_point), tally(s, "wrong name", grid_point)
            cells.append(f"{t[0]}/{t[1]}, {w[0]}/{w[1]}, {t[3]}")
        print(f"| {', '.join('off' if v is None else str(v) for v in grid_point)} | " + " | ".join(cells) + " |")
    if heads:
        print(f"File heads of {REGION_MAX_CHARS} characters, causal: {len(heads)} files, p50 "
              f"{statistics.median(heads):.0f} ms, max {max(heads):.0f} ms")
    if pastes:
        print(f"Pasted blocks' regions, causal: {len(pastes)} files, p50 {statistics.median(pastes):.0f} ms, "
              f"max {max(pastes):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
