"""`dllm-lsp eval`: HumanEval infilling pass@1, held-out exact match, decoding ablations.

    dllm-lsp eval --stride 17                              # the embedded model
    dllm-lsp eval --model runs/cpu1/best --benchmarks single-line,multi-line,heldout
    dllm-lsp eval --endpoint http://127.0.0.1:8000 --kind openai --openai-model NAME
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path

from ..protocol import MAX_CANDIDATES
from .args import ARM_KEYS
from .harness import Arm, ContextTrimmer, default_arms, evaluate, outcome_dicts
from .report import markdown, summarize
from .tasks import HELDOUT_KINDS, cut_heldout, folder_sources, heldout_sources, load_humaneval

MAX_TOKENS = {"single-line": 64, "multi-line": 128, "random-span": 128, "random-span-light": 128,
              "heldout-line": 64, "heldout-lines": 128, "heldout-span": 64}


def make_client(args):
    from ..clients import DaemonClient, InProcessClient, OpenAIFimClient

    if args.endpoint is None:
        extra = {key: getattr(args, key) for key in ("draft_tokens", "draft_rows", "draft_adapter", "draft_head",
                                                    "base_adapter", "draft_tree_tokens", "draft_branches",
                                                    "head_end_prob")
                 if getattr(args, key, None) is not None}
        return InProcessClient(model=args.model, threads=args.threads, weights=args.weights, **extra)
    if args.kind == "openai":
        return OpenAIFimClient(args.endpoint, model=args.openai_model or "default")
    if args.endpoint.startswith("unix:"):
        return DaemonClient(socket_path=args.endpoint[len("unix:"):], token=args.token, spawn=False)
    return DaemonClient(url=args.endpoint, token=args.token, spawn=False)


def load_tokenizer(model: str | None):
    """The evaluated model's tokenizer (the embedded one for endpoints or folders without one)."""
    from ..checkpoint import SMALL_MODEL_DIR, resolve_model_path
    from ..tokenizer import TextTokenizer

    try:
        path = resolve_model_path(model) / "tokenizer.json"
    except Exception:  # a hub id not in the local cache: count with our tokenizer
        path = SMALL_MODEL_DIR / "tokenizer.json"
    return TextTokenizer(path if path.exists() else SMALL_MODEL_DIR / "tokenizer.json")


DEFAULT_CONTEXT_TOKENS = 1024  # for checkpoints that do not say what window they were trained with


def context_budget(model: str | None, explicit: int | None) -> int:
    """Explicit --context-tokens, else the window the checkpoint was trained with (training.json)."""
    if explicit:
        return explicit
    from ..checkpoint import resolve_model_path

    try:
        info = resolve_model_path(model) / "training.json"
        return int(json.loads(info.read_text())["context_budget"]) if info.exists() else DEFAULT_CONTEXT_TOKENS
    except (OSError, ValueError, KeyError):
        return DEFAULT_CONTEXT_TOKENS


def collect_tasks(args) -> list:
    tasks = []
    for bench in args.benchmarks.split(","):
        bench = bench.strip()
        if bench == "heldout" or bench in HELDOUT_KINDS:
            # One kind alone ("heldout-span") is that kind's third of the same holes: its figures
            # pair with a whole held-out run's.
            if args.heldout_dir:
                sources = folder_sources(Path(args.heldout_dir))
            else:
                sources = heldout_sources(Path(args.manifest) if args.manifest else None,
                                          Path(args.heldout_data) if args.heldout_data else None)
            cut = cut_heldout(sources, args.heldout_count, seed=args.seed)
            tasks += [t for t in cut if bench == "heldout" or t.benchmark == bench]
        elif bench:
            tasks += load_humaneval(bench, Path(args.data_dir), args.limit, args.stride)
    return tasks


def pick_arms(spec: str, threshold: float, canvas_cache: str = "exact", candidates: str = "1") -> list[Arm]:
    arms = default_arms(threshold, canvas_cache)
    if spec != "all":
        try:
            arms = [arms[ARM_KEYS[k.strip()]] for k in spec.split(",")]
        except KeyError as exc:
            raise SystemExit(f"dllm-lsp eval: unknown arm {exc}; choose from {sorted(ARM_KEYS)} or 'all'") from None
    try:
        counts = [int(n) for n in candidates.split(",")]
    except ValueError:
        raise SystemExit(f"dllm-lsp eval: --candidates takes integers, got {candidates!r}") from None
    if any(not 1 <= n <= MAX_CANDIDATES for n in counts):
        raise SystemExit(f"dllm-lsp eval: --candidates must be in [1, {MAX_CANDIDATES}], got {candidates!r}")
    return [arm if n == 1 or arm.empty else dataclasses.replace(arm, name=f"{arm.name}, best of {n}", candidates=n)
            for arm in arms for n in (counts if not arm.empty else [1])]


def main(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    tasks = collect_tasks(args)
    arms = pick_arms(args.arms, args.threshold, args.canvas_cache, args.candidates)
    tok = load_tokenizer(args.model if args.endpoint is None else None)
    trim = ContextTrimmer(tok, context_budget(args.model if args.endpoint is None else None, args.context_tokens))
    client = make_client(args)
    started = time.time()

    def progress(arm, i, n):
        if i == n or i % 20 == 0:
            print(f"eval: {arm.name}: {i}/{n}", file=sys.stderr, flush=True)

    async def go():
        try:
            return await evaluate(client, tasks, arms, trim, MAX_TOKENS, args.timeout, args.workers or None, progress)
        finally:
            await client.close()

    outcomes = asyncio.run(go())
    rows = summarize(outcomes)
    table = markdown(rows)
    report = {"model": args.model or "default", "endpoint": args.endpoint, "context_tokens": trim.budget,
              "threshold": args.threshold, "canvas_cache": args.canvas_cache, "limit": args.limit, "stride": args.stride,
              "seconds": round(time.time() - started, 1), "summary": rows, "outcomes": outcome_dicts(outcomes)}
    if args.out_json:
        Path(args.out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_json).write_text(json.dumps(report, indent=1) + "\n")
    if args.out_md:
        Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_md).write_text(table)
    print(table)
    return 0
