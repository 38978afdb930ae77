"""What one more row costs in a pass of the default model over a cached context (the price of
checking one more draft token).

A blocks-of-1 pass runs the held-out last token plus one row per draft token, each with the
LM head. simulate_drafts.py counts how many passes a draft rule saves; this gives what the
rows cost, so the two together say whether a rule is faster, not only fewer passes.
Runs the engine's own model (its CPU weights) on the engine's thread (one OpenMP team, as
serving does), a context of --context tokens of this repository's source, causal rows after it.

    python benchmarks/bench_pass_rows.py [--threads 1] [--rows 1,2,3,4,5,6,8,12,16] [--repeats 40] [--weights auto]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels")]

from _bench_common import cpu_name  # noqa: E402
from dllm_engine.engine import Engine, EngineConfig  # noqa: E402
from dllm_engine.layout import causal_mask  # noqa: E402


def timings(engine: Engine, context: int, rows: list[int], repeats: int) -> dict[int, float]:
    """Median ms of a pass per row count, the counts interleaved round by round (drift hits all alike)."""
    runner, model = engine.runner, engine.loaded.model
    text = (ROOT / "dllm_lsp" / "server" / "infill.py").read_text()
    ids = torch.tensor(engine.loaded.tokenizer.encode(text)[:context])
    gen = torch.Generator().manual_seed(0)

    @torch.inference_mode()
    def run() -> dict[int, list[float]]:
        kv = runner._encode(ids).kv
        past = [(kv[i, 0][None], kv[i, 1][None]) for i in range(kv.shape[0])]
        out: dict[int, list[float]] = {r: [] for r in rows}
        for round_ in range(repeats + 3):
            for r in rows:
                x = torch.randint(100, 1000, (1, r), generator=gen)  # ordinary vocabulary, no markers
                positions = torch.arange(context, context + r)[None]
                t0 = time.perf_counter()
                model(x, positions, mask=causal_mask(context, r, "cpu"), past=past,
                      logits_rows=torch.ones(1, r, dtype=torch.bool), compact=True)
                if round_ >= 3:  # warm-up rounds left out
                    out[r].append((time.perf_counter() - t0) * 1000)
        return out

    return {r: statistics.median(ts) for r, ts in engine.between_passes(run).items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--context", type=int, default=400)
    ap.add_argument("--rows", default="1,2,3,4,5,6,8,12,16,24,32")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--weights", default="auto", help="auto, native, int4 or int8 (EngineConfig.weights)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    engine = Engine(EngineConfig(threads=args.threads, weights=args.weights))
    try:
        ms = timings(engine, args.context, [int(r) for r in args.rows.split(",")], args.repeats)
    finally:
        engine.shutdown()
    print(json.dumps({"cpu": cpu_name(), "threads": args.threads, "context": args.context,
                      "weights": engine.weights, "median_ms_by_rows": {r: round(v, 1) for r, v in ms.items()}}))
    print("| rows | ms a pass | over 1 row |\n|---|---|---|")
    for r, v in ms.items():
        print(f"| {r} | {v:.1f} | +{v - ms[min(ms)]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
