"""Approximate vs exact context cache for bidirectional families (tiny random models).

For a Dream-shaped (shifted logits, q/k/v bias) and a LLaDA-shaped (same-position)
random model, infill a batch of holes with `refresh_every` = 1 (exact: full
recompute each pass) and 2/4/8/16 (approximate: reuse the context K/V between
refreshes). Reports wall time, passes/s, and token agreement of the fills with
the exact mode's.

    OMP_NUM_THREADS=1 PYTHONPATH=.:engine:kernels python benchmarks/bench_family_cache.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from dllm_engine.checkpoint import LoadedModel
from dllm_engine.families.family_runner import FamilyRunner
from dllm_engine.families.infill_run import run_infill
from dllm_engine.model import DiffusionTransformer
from dllm_engine.model_config import ModelConfig


def random_model(family: str, hidden: int, layers: int, vocab: int, seed: int) -> LoadedModel:
    shifted = family == "dream"
    cfg = ModelConfig(vocab_size=vocab, hidden_size=hidden, num_layers=layers, num_heads=8, num_kv_heads=2,
                      intermediate_size=hidden * 3, rope_theta=1e6 if shifted else 5e5, qkv_bias=shifted,
                      tie_word_embeddings=False, logits_shift=shifted, attention="bidirectional", family=family,
                      mask_token_id=vocab - 1, eos_token_id=vocab - 2, pad_token_id=vocab - 2,
                      max_position_embeddings=4096, extra={"infill": "masks", "end_ids": [vocab - 2]})
    torch.manual_seed(seed)
    model = DiffusionTransformer(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                continue
            p.normal_(0.0, 1.0 if "embed" in name else 1.5 / p.shape[-1] ** 0.5)
    return LoadedModel(model=model.eval(), config=cfg, tokenizer=None, path=Path("."), name=f"random-{family}")


def agreement(a: list[list[int]], b: list[list[int]], width: int) -> float:
    same = total = 0
    for x, y in zip(a, b):
        x, y = x + [-1] * (width - len(x)), y + [-1] * (width - len(y))
        same += sum(p == q for p, q in zip(x, y))
        total += width
    return same / total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--prefix", type=int, default=256)
    ap.add_argument("--suffix", type=int, default=128)
    ap.add_argument("--canvas", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--refresh", default="1,2,4,8,16")
    args = ap.parse_args()
    print(f"| family | refresh_every | median s / batch | passes | passes/s | token agreement vs exact |")
    print(f"|---|---|---|---|---|---|")
    for family in ("dream", "llada"):
        rows: dict[int, list] = {}
        for seed in range(args.seeds):
            loaded = random_model(family, args.hidden, args.layers, args.vocab, seed)
            g = torch.Generator().manual_seed(100 + seed)
            holes = [(torch.randint(0, args.vocab - 8, (args.prefix,), generator=g).tolist(),
                      torch.randint(0, args.vocab - 8, (args.suffix,), generator=g).tolist()) for _ in range(args.batch)]
            exact_fill = None
            for n in (int(x) for x in args.refresh.split(",")):
                runner = FamilyRunner(loaded, refresh_every=n)
                t0 = time.perf_counter()
                res = run_infill(runner, holes, args.canvas, threshold=args.threshold)
                dt = time.perf_counter() - t0
                if n == 1:
                    exact_fill = res.tokens
                rows.setdefault(n, []).append((dt, res.passes, agreement(res.tokens, exact_fill, args.canvas)))
        for n, runs in rows.items():
            dt = statistics.median(r[0] for r in runs)
            passes = statistics.median(r[1] for r in runs)
            agree = statistics.mean(r[2] for r in runs)
            print(f"| {family} | {n}{' (exact)' if n == 1 else ''} | {dt:.3f} | {passes:.0f} | {passes / dt:.1f} | {agree:.3f} |")


if __name__ == "__main__":
    main()
