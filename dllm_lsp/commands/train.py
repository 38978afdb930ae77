"""`dllm-lsp train`: train the embedded default model (or a larger one on a GPU).

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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dllm_engine.training import run as train_run

    if args.tokenizer is None:
        args.tokenizer = str(train_run.DEFAULT_TOKENIZER)
    return train_run.main(args)
