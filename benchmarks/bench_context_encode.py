"""A fresh context's encoding (the first request at a new cursor place), the default model:
plain-causal attention (ops.CAUSAL, SDPA's is_causal) against the explicit causal mask it
replaced, side by side in one run.

Moving the cursor changes the start of the native context (`<suf>` suffix `<pre>` prefix), so
the first request there encodes the whole context before its first pass. Both arms run the
engine's own model on the engine's thread (one OpenMP team, as serving does), the same tokens
of this repository's source, interleaved round by round; reported per context length: median
ms of each arm, the ratio, and the largest K/V difference between the arms.

    python benchmarks/bench_context_encode.py [--threads 2] [--lengths 256,512,768,1000] [--repeats 5]
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
from dllm_engine import ops  # noqa: E402
from dllm_engine.engine import Engine, EngineConfig  # noqa: E402
from dllm_engine.layout import causal_mask  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lengths", default="256,512,768,1000")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    engine = Engine(EngineConfig(model="default", threads=args.threads))
    model = engine.loaded.model
    text = "".join(p.read_text() for p in sorted((ROOT / "dllm_lsp" / "server").glob("*.py")))
    all_ids = torch.tensor(engine.loaded.tokenizer.encode(text))
    lengths = [int(n) for n in args.lengths.split(",")]

    @torch.inference_mode()
    def run() -> list[dict]:
        rows = []
        for n in lengths:
            ids, positions = all_ids[:n][None], torch.arange(n)[None]
            arms = {"explicit mask": lambda: model(ids, positions, mask=causal_mask(0, n, "cpu"), kv_only=True)[1],
                    "plain causal": lambda: model(ids, positions, mask=ops.CAUSAL, kv_only=True)[1]}
            times: dict[str, list[float]] = {arm: [] for arm in arms}
            for round_ in range(args.repeats + 1):
                for arm, fn in arms.items():
                    t0 = time.perf_counter()
                    kv = fn()
                    if round_:  # the first round warms both up
                        times[arm].append((time.perf_counter() - t0) * 1000)
            old, new = arms["explicit mask"](), arms["plain causal"]()
            diff = max(float((a - b).abs().max()) for (ka, va), (kb, vb) in zip(old, new) for a, b in ((ka, kb), (va, vb)))
            mask_ms, causal_ms = statistics.median(times["explicit mask"]), statistics.median(times["plain causal"])
            rows.append({"tokens": n, "explicit_mask_ms": round(mask_ms, 1), "plain_causal_ms": round(causal_ms, 1),
                         "ratio": round(causal_ms / mask_ms, 3), "max_kv_difference": diff})
            del kv
        return rows

    rows = engine.between_passes(run)
    engine.shutdown()
    print(json.dumps({"cpu": cpu_name(), "torch": torch.__version__, "threads": args.threads,
                      "model": "default", "repeats": args.repeats, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
