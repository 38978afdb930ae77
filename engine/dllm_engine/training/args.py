"""`dllm-lsp train` options (argparse only: registering the command imports nothing heavy)."""

from __future__ import annotations

from .corpus import OPTIONS as CORPUS_OPTIONS


def add_arguments(p) -> None:
    p.add_argument("--out", default="runs/default", help="run directory (state.pt, loss.csv, best/, last/)")
    p.add_argument("--data", default="runs/data", help="token-file directory (train/, heldout/, manifest.json)")
    p.add_argument("--manifest", help="corpus manifest to tokenize (default: written from the stdlib)")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json (default: the embedded model's)")
    for flag, kw in CORPUS_OPTIONS[1:]:  # --with-packages, --package-cap-mb (--manifest names a whole corpus)
        p.add_argument(flag, **kw)
    p.add_argument("--prepare-only", action="store_true", help="only build the manifest and token files")
    p.add_argument("--resume", action="store_true", help="continue from OUT/state.pt if present")
    p.add_argument("--init", help="continue from this native checkpoint's weights (e.g. the embedded default model)")
    p.add_argument("--cpu-bf16", action="store_true", help="bf16 autocast on CPU (faster on CPUs with bf16 matmuls)")
    p.add_argument("--gpu-preset", action="store_true", help="the one-shot single-GPU recipe (~45M params, 7 min)")
    p.add_argument("--time-budget", help="stop after this much training time (e.g. 80m, 1.5h, 420)")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=0)
    p.add_argument("--context", type=int, default=0, help="max context tokens per example (default 256)")
    p.add_argument("--lr", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--aux-weight", type=float, default=0.5, help="weight of the next-token loss on the context")
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--save-every", help="checkpoint interval (default 5m)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU)")
    p.add_argument("--workers", type=int, default=None, help="batch-building processes (default: 0 on CPU, 8 with --gpu-preset)")
    for flag in ("hidden", "layers", "heads", "kv-heads", "ffn"):
        p.add_argument(f"--{flag}", type=int, default=0, help=f"model {flag} (default: the embedded shape)")
    p.add_argument("--ship", help="after training, copy best/ here with its model card facts")
