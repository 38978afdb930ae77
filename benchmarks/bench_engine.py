"""Engine vs a naive reference sampler, and a warm-cache keystroke replay (CPU).

The naive sampler is what LLaDA's `generate.py` does: the whole sequence
(context + canvas) recomputed every pass, one token committed per pass by
confidence. Ours: exact context cache, canvas-only passes, threshold decoding.
Same model, same threads, same holes, in one run.

    .venv/bin/python benchmarks/bench_engine.py [--model PATH] [--repeats 5] [--write]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from dllm_engine.checkpoint import SMALL_MODEL_DIR
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.layout import native_context_ids
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest
from dllm_engine.training.corpus import read_manifest, write_manifest

ROOT = Path(__file__).resolve().parents[1]


@torch.inference_mode()
def naive_infill(engine: Engine, prefix: str, suffix: str, length: int) -> tuple[list[int], int]:
    """LLaDA generate.py style: full recompute each pass, one token per pass."""
    model, cfg, tok = engine.loaded.model, engine.loaded.config, engine.tokenizer
    ctx = native_context_ids(tok.encode(prefix), tok.encode(suffix), cfg)
    t = len(ctx)
    ids = torch.tensor(ctx + [cfg.mask_token_id] * length)[None]
    pos = torch.arange(t + length)[None]
    rows, cols = torch.arange(t + length)[:, None], torch.arange(t + length)[None, :]
    mask = torch.where(rows >= t, torch.ones_like(cols, dtype=torch.bool), cols <= rows)[None, None]
    banned = [cfg.mask_token_id, cfg.suffix_token_id, cfg.prefix_token_id]
    passes = 0
    for _ in range(length):
        logits, _ = model(ids, pos, mask=mask)
        logits = logits[0, t:].float()
        logits[:, banned] = float("-inf")
        p = logits.softmax(-1)
        conf, tokens = p.max(-1)
        masked = ids[0, t:] == cfg.mask_token_id
        conf = conf.masked_fill(~masked, -1.0)
        j = int(conf.argmax())
        ids[0, t + j] = tokens[j]
        passes += 1
    return ids[0, t:].tolist(), passes


def context_text(chars: int) -> tuple[str, str]:
    manifest_path = ROOT / "runs" / "manifest.json"
    manifest = read_manifest(manifest_path) if manifest_path.exists() else write_manifest(manifest_path)
    text = "\n".join(Path(p).read_text() for p in manifest["heldout"][:6])
    cut = text.index("\n", chars) + 1
    return text[:cut], text[cut: cut + chars // 4]


def trim_to_tokens(engine: Engine, prefix: str, suffix: str, n_ctx: int) -> tuple[str, str]:
    """Shorten the prefix (from the left, at a line start) until the context is ~n_ctx tokens."""
    tok = engine.tokenizer
    suffix_ids = tok.encode(suffix)
    while len(tok.encode(prefix)) + len(suffix_ids) + 2 > n_ctx:
        prefix = prefix[prefix.index("\n", 1) + 1:]
    return prefix, suffix


def median_ms(xs):
    return 1000 * statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--context-tokens", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keystrokes", type=int, default=40)
    ap.add_argument("--write", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    engine = Engine(EngineConfig(model=args.model, threads=args.threads, dtype=args.dtype))
    # The shape is 1,024 context tokens: lift the default model's trained-context trim
    # so the engine and the naive sampler both see all of it.
    engine.loaded.config.extra.pop("context_tokens", None)
    prefix, suffix = trim_to_tokens(engine, *context_text(8000), args.context_tokens)
    n_ctx = len(native_context_ids(engine.tokenizer.encode(prefix), engine.tokenizer.encode(suffix), engine.loaded.config))
    rows = []
    for length in (16, 64):
        naive_t, ours_cold, ours_warm, ours_passes = [], [], [], []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            _, naive_passes = naive_infill(engine, prefix, suffix, length)
            naive_t.append(time.perf_counter() - t0)
            engine.drop_caches()  # on the engine thread, as every cold-start bench does
            req = lambda: InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=length, bucket=length)],
                                        params=DiffusionParams(threshold=0.9))
            t0 = time.perf_counter()
            res = engine.infill(req())
            ours_cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            res = engine.infill(req())
            ours_warm.append(time.perf_counter() - t0)
            ours_passes.append(res.holes[0].passes)
        rows.append((length, median_ms(naive_t), naive_passes, median_ms(ours_cold), median_ms(ours_warm),
                     statistics.median(ours_passes)))

    # Keystroke replay: type a line character by character at the end of the prefix,
    # re-infilling a 16-token hole after each keystroke, with the cache warm.
    typed = "        result = self.parse(value, strict=True)"
    engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=16, bucket=16)]))
    replays = {}
    for label, stop in (("16-token hole", ()), ("16-token rest-of-line hole (stop at newline, as the server asks)", ("\n",))):
        key_ms, key_passes, key_reused = [], [], []
        text = prefix
        for ch in (typed * 4)[: args.keystrokes]:
            text += ch
            t0 = time.perf_counter()
            res = engine.infill(InfillRequest(holes=[Hole(prefix=text, suffix=suffix, max_tokens=16, bucket=16,
                                                          stop=stop)]))
            key_ms.append(1000 * (time.perf_counter() - t0))
            key_passes.append(res.holes[0].passes)
            key_reused.append(res.cached_tokens / max(1, res.context_tokens))
        replays[label] = (key_ms, key_passes, key_reused)
    engine.shutdown()

    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    model_name = args.model or f"default ({SMALL_MODEL_DIR.name}, {engine.loaded.config.num_params / 1e6:.1f} M params)"
    lines = [
        "## Engine vs naive sampler, and keystroke replay (issue 2)",
        "",
        f"- command: `.venv/bin/python benchmarks/bench_engine.py --repeats {args.repeats} --threads {args.threads} "
        f"--dtype {args.dtype}`",
        f"- machine: {platform.machine()}, {torch.get_num_threads()} torch thread(s), {platform.processor() or 'cpu'}; "
        f"shared 2-core box (noisy: medians of {args.repeats})",
        f"- date: {now}; model: {model_name}; context: {n_ctx} tokens",
        "",
        "| hole | naive: ms | naive: passes | engine cold cache: ms | engine warm: ms | engine passes | speedup (naive / warm) | speedup (naive / cold) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for length, nt, np_, oc, ow, op in rows:
        lines.append(f"| {length} tokens | {nt:.0f} | {np_} | {oc:.0f} | {ow:.0f} | {op:.0f} | {nt / ow:.1f}x | {nt / oc:.1f}x |")
    lines += ["", f"Keystroke replay: {args.keystrokes} keystrokes typed at the end of the prefix, a re-infill "
              "after each, warm cache. Target: p50 <= 40 ms for a 16-token hole.", "",
              "| hole | p50 ms | p95 ms | median passes | context from cache (median) |", "|---|---|---|---|---|"]
    for label, (key_ms, key_passes, key_reused) in replays.items():
        q = statistics.quantiles(key_ms, n=20)
        lines.append(f"| {label} | {statistics.median(key_ms):.1f} | {q[18]:.1f} | "
                     f"{statistics.median(key_passes):.0f} | {100 * statistics.median(key_reused):.1f}% |")
    lines.append("")
    out = "\n".join(lines)
    print(out)
    if args.write:
        with open(ROOT / "benchmarks" / "RESULTS.md", "a") as f:
            f.write("\n" + out)


if __name__ == "__main__":
    sys.exit(main())
