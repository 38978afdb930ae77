"""The default model's decoding on this CPU: weights (bf16 as loaded, or weight-only int4)
and drafting (off, or on), side by side in one run.

Single-line holes cut from this repository's own source (code written after the base was
trained; never HumanEval), or with `--source humaneval` the HumanEval single-line tasks
(every `--stride`th: the issue's own tasks, for a paired latency beside `dllm-lsp eval`'s
tokens per pass): for each hole, every arm fills it in turn (interleaved, so a
change in the machine's load touches every arm alike). Reports per arm: median and p95
request latency, time per pass (the request's time over its passes), passes per fill, the fill's own tokens per pass,
and how many fills agree with the first arm's text.

    python benchmarks/bench_default_decoding.py [--holes 40] [--threads 2] [--arms native:0,native:8,int4:0,int4:8] [--rev COMMIT]
        [--engine-from ../other-checkout]

An arm `weights:drafts:rows=N` also runs N draft rows a pass (draft_adapter.py; the shipped
adapter, or `adapter=FOLDER`); an arm without `rows=` runs none (drafting from the text alone).
An arm `weights:drafts:exact` runs with every row count sent to the projections as it is
(no row_buckets.py padding: the code before issue 16 defect 8), to measure the padding's cost.
An arm `weights:drafts:lora=none|FOLDER` runs the base without its adapter or with that one
(low_rank.py; the default is the shipped adapter, if any).
An arm `weights:drafts:head=FOLDER` guesses with that draft head (draft_head.py) when the text
offers no draft; `head=none` runs without one (the default is the shipped head, if any).
An arm `weights:drafts:cand=N` asks for best of N (DiffusionParams.candidates, candidates.py).
An arm `weights:drafts:tree=N:branches=K` checks a draft tree of at most N draft tokens a
pass with the head's K likeliest chains in it (draft_tree.py); `tree=0` one chain a pass.
"exact" counts the fills equal to the line that was cut out (held-out exact match).

Each arm is an engine with a thread of its own, and each such thread keeps its own OpenMP team
(engine_calls.py): several arms in one process are slower per pass than one alone (on 2 cores,
~1.7x), alike for every arm. Their ratios hold; for absolute figures run one arm per process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch

from _bench_common import cpu_name, pct, sources_at

ROOT = Path(__file__).resolve().parents[1]


def cut_holes(count: int, seed: int, rev: str | None = None) -> list[tuple[str, str, str]]:
    """(prefix, suffix, line): a whole line of dllm_lsp/'s source removed, the cursor after its
    indentation; from commit `rev`'s source when given (the same sample on any later checkout)."""
    with sources_at(ROOT, rev, ["dllm_lsp"]) as root:
        return _cut_lines(root, count, seed)


def _cut_lines(root: Path, count: int, seed: int) -> list[tuple[str, str, str]]:
    holes = []
    for path in sorted((root / "dllm_lsp").rglob("*.py")):
        lines = path.read_text().splitlines(keepends=True)
        for i, line in enumerate(lines):
            body = line.strip()
            if len(body) < 12 or body.startswith(("#", '"""', "'")) or i < 5:
                continue
            indent = line[: len(line) - len(line.lstrip())]
            holes.append(("".join(lines[:i]) + indent, "\n" + "".join(lines[i + 1:]), body))
    random.Random(seed).shuffle(holes)
    return holes[:count]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--holes", type=int, default=40)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--arms", default="native:0,native:8,int4:0,int4:8", help="weights:draft_tokens, comma-separated")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rev", help="with --source repo: draw the lines from this commit's code")
    p.add_argument("--source", choices=("repo", "humaneval"), default="repo",
                   help="the holes: single lines of dllm_lsp/, or HumanEval single-line tasks")
    p.add_argument("--stride", type=int, default=5, help="with --source humaneval: every Nth task (then --holes at most)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--model", default="default", help="the model (a folder: e.g. the base staged on a GPU machine)")
    p.add_argument("--device", default="auto", help="the engines' device (auto: CUDA when there is one)")
    p.add_argument("--data-dir", type=Path, default=None, help="with --source humaneval: where its files are")
    p.add_argument("--engine-from", type=Path, default=ROOT,
                   help="a checkout whose engine is measured (another commit's, on this checkout's holes)")
    args = p.parse_args()
    sys.path[:0] = [str(args.engine_from / "engine"), str(args.engine_from / "kernels")]
    from dllm_engine.engine import Engine, EngineConfig
    try:
        from dllm_engine import row_buckets
    except ImportError:  # --engine-from a checkout before row buckets: every arm is exact
        row_buckets = None
    from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest

    arms = [(w, int(k), *rest) for w, k, *rest in (a.split(":") for a in args.arms.split(","))]

    def rows_of(arm):  # an "exact" arm: every row count passes unpadded while it runs
        return mock.patch.object(row_buckets, "bucket_rows", lambda rows: rows) if "exact" in arm[2:] and row_buckets \
            else contextlib.nullcontext()

    def options(arm):  # rows=N, adapter=FOLDER, head=FOLDER|none (an engine before them takes none)
        opts = dict(o.split("=", 1) for o in arm[2:] if "=" in o)
        out = {"draft_rows": int(opts.get("rows", 0))} if "rows" in opts else {}
        if "adapter" in opts:
            out["draft_adapter"] = opts["adapter"]
        if "draft_rows" in EngineConfig.__dataclass_fields__ and "draft_rows" not in out:
            out["draft_rows"] = 0
        if "head" in opts:
            out["draft_head"] = opts["head"]
        if "tree" in opts:  # the draft tree's most tokens (0: one chain) and the head's chains in it
            out["draft_tree_tokens"] = int(opts["tree"])
        if "branches" in opts:
            out["draft_branches"] = int(opts["branches"])
        if "hend" in opts:  # EngineConfig.head_end_prob (an engine before it takes only the default)
            out["head_end_prob"] = float(opts["hend"])
        if "lora" in opts:  # EngineConfig.base_adapter: shipped, none or a folder (low_rank.py)
            out["base_adapter"] = opts["lora"]
        return out

    def params(arm):  # cand=N: best of N (an engine before candidates takes only the default)
        opts = dict(o.split("=", 1) for o in arm[2:] if "=" in o)
        return DiffusionParams(candidates=int(opts["cand"])) if "cand" in opts else DiffusionParams()

    engines = {arm: Engine(EngineConfig(model=args.model, device=args.device, threads=args.threads, weights=arm[0],
                                        draft_tokens=arm[1], **options(arm)))
               for arm in arms}
    if args.source == "humaneval":
        from dllm_engine.evaluation.tasks import load_humaneval

        data = {"data_dir": args.data_dir} if args.data_dir else {}
        holes = [(t.prefix, t.suffix, t.middle.strip())
                 for t in load_humaneval("single-line", limit=args.holes, stride=args.stride, **data)]
    else:
        holes = cut_holes(args.holes, args.seed, args.rev)
    stats = {arm: {"fresh": [], "latency": [], "passes": 0, "tokens": 0, "texts": [], "exact": 0} for arm in arms}
    for warm in holes[:2]:  # first calls build kernels' packed buffers and the context cache
        for arm, e in engines.items():
            with rows_of(arm):
                e.infill(InfillRequest(holes=[Hole(prefix=warm[0], suffix=warm[1], max_tokens=64, stop=("\n",))]))
    for prefix, suffix, line in holes:
        for arm, e in engines.items():
            s = stats[arm]
            with rows_of(arm):
                e.drop_caches()  # every arm encodes the context afresh, as on a file just opened
                for key in ("fresh", "latency"):  # then again with the context cached, as on a keystroke
                    t0 = time.perf_counter()
                    h = e.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=64, stop=("\n",))],
                                               params=params(arm))).holes[0]
                    s[key].append((time.perf_counter() - t0) * 1000)
            s["passes"] += h.passes
            s["tokens"] += h.tokens
            s["texts"].append(h.text)
            s["exact"] += h.text.strip() == line
    for e in engines.values():
        e.shutdown()
    first = stats[arms[0]]["texts"]
    rows = []
    for arm in arms:
        s = stats[arm]
        rows.append({
            "weights": ":".join([arm[0], *arm[2:]]), "draft_tokens": arm[1], "holes": len(holes),
            "fresh_ms_p50": round(statistics.median(s["fresh"]), 1),
            "latency_ms_p50": round(statistics.median(s["latency"]), 1), "latency_ms_p95": round(pct(s["latency"], 0.95), 1),
            "passes_per_fill": round(s["passes"] / len(holes), 2),
            "fill_tokens_per_pass": round(s["tokens"] / max(1, s["passes"]), 2),
            "ms_per_pass": round(sum(s["latency"]) / max(1, s["passes"]), 1),  # context cached: passes alone
            "latency_ms_mean": round(statistics.mean(s["latency"]), 1),
            "same_text_as_first_arm": sum(a == b for a, b in zip(first, s["texts"])),
            "exact": s["exact"],
        })
    where = "dllm_lsp/" if args.source == "repo" else f"HumanEval single-line (every {args.stride}th task)"
    device = torch.cuda.get_device_name(0) if next(iter(engines.values())).config.device.startswith("cuda") else cpu_name()
    head = f"{device}, torch {torch.__version__}, {args.threads} threads, {len(holes)} single-line holes of {where}"
    if args.engine_from != ROOT:
        head += f", engine from {args.engine_from}"
    if args.json:
        print(json.dumps({"machine": head, "rows": rows}, indent=1))
    else:
        print(head)
        print("| weights | drafts | fresh context p50 ms | cached context p50 ms | p95 ms | mean ms | passes/fill | fill tokens/pass | ms/pass | same text as first arm | exact |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['weights']} | {r['draft_tokens']} | {r['fresh_ms_p50']} | {r['latency_ms_p50']} | {r['latency_ms_p95']} | {r['latency_ms_mean']} | {r['passes_per_fill']} "
                  f"| {r['fill_tokens_per_pass']} | {r['ms_per_pass']} | {r['same_text_as_first_arm']}/{r['holes']} | {r['exact']}/{r['holes']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
