"""`dllm-lsp train`: train the embedded default model (or a larger one on a GPU).

`dllm-lsp train --base NAME`: adapt a pretrained base instead: train its draft rows'
adapter (dllm_engine/draft_adapter.py, training/draft_rows.py), resumable in --out.

The engine's trainer (`dllm_engine.training.run`) is imported inside `run`,
so registering this command costs nothing at server start.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    from dllm_engine.training.args import add_arguments  # argparse only: no torch

    p = subparsers.add_parser("train", help="train a diffusion model on the corpus manifest (CPU or one GPU)",
                              description="Train the native diffusion model: masked-diffusion loss on "
                                          "fill-in-the-middle canvases, resumable, with a loss curve.")
    add_arguments(p)
    from dllm_engine.training.draft_rows_args import add_arguments as add_draft_arguments  # no torch either

    g = p.add_argument_group("adapting a pretrained base (--base)")
    g.add_argument("--base", help="a base's name (bases/catalog.py; 'default' for the default model's): train its "
                                  "draft rows' adapter, distilled from the frozen base, into --out")
    shared = {"--lr", "--warmup", "--eval-every", "--seed", "--threads", "--model", "--run", "--max-steps", "--device", "--workers",
              "--with-packages", "--package-cap-mb"}
    add_draft_arguments(g, skip=shared)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.base:
        return _adapt(args)
    from dllm_engine.training import run as train_run

    if args.tokenizer is None:
        args.tokenizer = str(train_run.DEFAULT_TOKENIZER)
    return train_run.main(args)


def _adapt(args: argparse.Namespace) -> int:
    """The shared options keep their meaning; their from-scratch defaults (0: automatic)
    become the draft rows' own."""
    from dllm_engine.training import draft_rows
    from dllm_engine.training.run import parse_duration

    args.model = args.base
    args.run = f"runs/drafts-{args.base}" if args.out == "runs/default" else args.out
    args.lr = args.lr or 1e-3
    args.warmup = args.warmup or 50
    args.eval_every = args.eval_every or 100
    args.workers = args.workers or 0
    if args.time_budget:
        args.minutes = parse_duration(args.time_budget) / 60
    return draft_rows.run(args)
