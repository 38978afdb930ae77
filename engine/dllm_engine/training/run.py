"""`dllm-lsp train`: prepare the token files, then train (or resume) a run.

    dllm-lsp train --out runs/cpu1 --time-budget 80m         # CPU, default shape
    dllm-lsp train --out runs/gpu1 --gpu-preset --data DIR   # one short GPU run
    dllm-lsp train --prepare-only --data runs/data            # just the token files

The data directory holds `train/` and `heldout/` token files built from the
corpus manifest (`manifest.json`, written on first use from the standard
library, minus tests and anything mentioning HumanEval).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..checkpoint import SMALL_MODEL_DIR
from .batches import StreamConfig
from .objective import LossConfig

DEFAULT_TOKENIZER = SMALL_MODEL_DIR / "tokenizer.json"

# The one-shot single-GPU recipe (benchmarks/gpu_train.sh): ~19M params, so the bf16
# checkpoint (~38 MB) still fits the repository's 40 MB limit and can be shipped.
# Compute-optimal size for the budget: 7 minutes of an H200 at an estimated
# 0.5-1M tokens/s is 200-400M tokens, 6*N*D ~ 2-5e16 FLOPs, for which N ~ 15-20M
# (Chinchilla, N ~ sqrt(C / 120)); a 45M model would see half the tokens.
GPU_PRESET = {
    "model": {"hidden_size": 512, "num_layers": 5, "num_heads": 8, "num_kv_heads": 4,
              "intermediate_size": 1408, "max_position_embeddings": 2048},
    "batch_size": 128, "context_budget": 512, "lr": 1.5e-3, "warmup_steps": 200,
    "time_budget_s": 420.0, "max_steps": 1_000_000, "save_every_s": 120.0, "eval_every": 250,
    "workers": 8,
}


def parse_duration(text: str) -> float:
    """'90', '90s', '15m', '1.5h' -> seconds."""
    text = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], None)
    try:
        return float(text[:-1]) * scale if scale else float(text)
    except ValueError:
        raise SystemExit(f"dllm-lsp train: bad duration {text!r} (examples: 300, 15m, 1.5h)") from None


def prepare(data_dir: Path, tokenizer: Path, manifest_path: Path | None = None,
            with_packages: bool = False, package_cap_mb: float = 4.0) -> dict:
    """Write manifest.json and the train/heldout token files under data_dir unless present.

    `with_packages` adds permissively licensed installed packages (packages.py), each capped at
    `package_cap_mb` of source: the larger corpus for GPU runs.
    """
    from .corpus import read_manifest
    from .packages import training_manifest
    from .token_data import META_FILE, build_token_file

    data_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = manifest_path or data_dir / "manifest.json"
    if manifest_path.exists():
        manifest = read_manifest(manifest_path)
    else:
        manifest = training_manifest(with_packages, package_cap_mb)
        manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    metas = {}
    for split in ("train", "heldout"):
        out = data_dir / split
        meta_file = out / META_FILE
        metas[split] = json.loads(meta_file.read_text()) if meta_file.exists() else \
            build_token_file(manifest, split, tokenizer, out)
    return metas


def build_config(args):
    from .trainer import TrainConfig

    data_dir = Path(args.data)
    model = {}
    for flag, key in (("hidden", "hidden_size"), ("layers", "num_layers"), ("heads", "num_heads"),
                      ("kv_heads", "num_kv_heads"), ("ffn", "intermediate_size")):
        if getattr(args, flag, None):
            model[key] = getattr(args, flag)
    preset = dict(GPU_PRESET) if args.gpu_preset else {}
    model = {**preset.get("model", {}), **model}
    stream = StreamConfig(batch_size=args.batch_size or preset.get("batch_size", 16),
                          context_budget=args.context or preset.get("context_budget", 256), seed=args.seed)
    cfg = TrainConfig(
        out_dir=Path(args.out), data_dir=data_dir / "train",
        heldout_dir=(data_dir / "heldout") if (data_dir / "heldout").exists() else None,
        tokenizer=Path(args.tokenizer), model=model, stream=stream,
        loss=LossConfig(aux_weight=args.aux_weight),
        lr=args.lr or preset.get("lr", 2e-3),
        warmup_steps=args.warmup if args.warmup is not None else preset.get("warmup_steps", 100),
        max_steps=args.max_steps or preset.get("max_steps", 100_000),
        time_budget_s=parse_duration(args.time_budget) if args.time_budget else preset.get("time_budget_s"),
        save_every_s=parse_duration(args.save_every) if args.save_every else preset.get("save_every_s", 300.0),
        eval_every=args.eval_every or preset.get("eval_every", 200),
        device=args.device, threads=args.threads, compile=args.compile,
        workers=args.workers if getattr(args, "workers", None) is not None else preset.get("workers", 0),
        init_from=Path(args.init) if getattr(args, "init", None) else None,
        cpu_bf16=bool(getattr(args, "cpu_bf16", False)),
    )
    return cfg


def main(args) -> int:
    import torch

    tokenizer = Path(args.tokenizer)
    data_dir = Path(args.data)
    if not (data_dir / "train").exists() or args.prepare_only:
        torch.set_num_threads(args.threads)
        metas = prepare(data_dir, tokenizer, Path(args.manifest) if args.manifest else None,
                        args.with_packages, args.package_cap_mb)
        print(json.dumps({s: {k: m[k] for k in ("num_files", "num_tokens")} for s, m in metas.items()}), file=sys.stderr)
        if args.prepare_only:
            return 0
    from .trainer import Trainer

    trainer = Trainer(build_config(args))
    resumed = args.resume and trainer.load_state()
    n_params = sum(p.numel() for p in trainer.model.parameters())
    print(f"train: {n_params / 1e6:.2f}M params on {trainer.device}, "
          f"{'resumed at step ' + str(trainer.step) if resumed else ('from ' + args.init) if getattr(args, 'init', None) else 'from scratch'}", file=sys.stderr, flush=True)

    def log(row):
        keys = ("step", "tokens", "loss", "masked_ce", "next_ce", "lr", "tokens_per_s")
        print(row["split"] + " " + " ".join(f"{k}={row[k]:.4g}" if isinstance(row.get(k), float) else f"{k}={row.get(k)}"
                                            for k in keys if k in row), file=sys.stderr, flush=True)

    trainer.run(on_log=log)
    if args.ship:
        from .ship import ship

        print(ship(Path(args.out), Path(args.ship)), file=sys.stderr)
    return 0
