"""What the default model's base adapter (low_rank.py) costs a forward, its factors run three ways
in one process: int8 weight-only kernels (the engine's default on a CPU), the model's dtype
(oneDNN), and no adapter at all (each wrapped projection's base product alone).

One engine, one request filled over and over; the model's forward is timed on the engine thread
(a pass over a cached context: the last token, the current slot and its draft rows). The modes
alternate round by round, so a change in the machine's load touches each alike; medians of the
rounds. The bare mode's fills differ from the others (they are the bare base's), so its passes
differ too: compare per forward, not per fill.

    python benchmarks/bench_adapter_price.py [--rounds 6] [--fills 4] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels"), str(ROOT / "benchmarks")]

MODES = ("int8", "model dtype", "none")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--fills", type=int, default=4, help="fills timed per mode and round")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from _bench_common import cpu_name
    from dllm_engine import low_rank, row_buckets
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    engine = Engine(EngineConfig(model="default", threads=args.threads))
    try:
        model = engine.loaded.model
        wrapped = [m for m in model.modules() if isinstance(m, low_rank.LowRankAdded)]
        if not wrapped or wrapped[0].down is None:
            raise SystemExit("the default model runs no adapter through int8 kernels here (no adapter, or no "
                             "weight-only kernels on this machine)")
        factors = [(m.down, m.up) for m in wrapped]

        def base_only(m):
            return lambda x: m.base(x) if callable(m.base) else row_buckets.linear(x, *m.base)

        def use(mode: str) -> None:
            for m, (down, up) in zip(wrapped, factors):
                m.down, m.up = (down, up) if mode == "int8" else (None, None)
                if mode == "none":
                    m.forward = base_only(m)
                else:
                    m.__dict__.pop("forward", None)

        timed = {"n": 0, "s": 0.0}
        forward = model.forward

        def timed_forward(*a, **k):
            t0 = time.perf_counter()
            out = forward(*a, **k)
            timed["s"] += time.perf_counter() - t0
            timed["n"] += 1
            return out

        model.forward = timed_forward
        request = InfillRequest(holes=[Hole(prefix="def add(a, b):\n    '''Add two numbers.'''\n    result = ",
                                            suffix="\n    return result\n", max_tokens=16)])
        per_mode: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                use(mode)
                engine.infill(request)  # its context cached, its row counts met
                timed.update(n=0, s=0.0)
                for _ in range(args.fills):
                    engine.infill(request)
                per_mode[mode].append(1000 * timed["s"] / timed["n"])
    finally:
        engine.shutdown()
    rows = {m: {"forward_ms_median": round(statistics.median(v), 2), "rounds": [round(x, 2) for x in v]}
            for m, v in per_mode.items()}
    if args.json:
        print(json.dumps({"cpu": cpu_name(), "threads": args.threads, "modes": rows}, indent=2))
        return 0
    print(f"{cpu_name()}, {args.threads} threads, {len(wrapped)} adapted products")
    print("| adapter factors | forward ms (median of rounds) | rounds |")
    print("|---|---|---|")
    for m, r in rows.items():
        print(f"| {m} | {r['forward_ms_median']} | {', '.join(map(str, r['rounds']))} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
