"""`dllm-lsp eval`: score a model or engine endpoint on HumanEval infilling and a held-out FIM set.

The harness lives in `dllm_engine.evaluation`; it is imported inside `run`.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    from dllm_engine.evaluation.args import add_arguments  # argparse only: no torch

    p = subparsers.add_parser("eval", help="evaluate a model: HumanEval infilling pass@1, held-out exact match",
                              description="pass@1 (tests run in subprocesses), exact match, syntax-valid rate, "
                                          "passes per infill, tokens per pass, latency; oracle vs variable "
                                          "length and one-token-per-pass vs threshold ablations.")
    add_arguments(p)
    p.add_argument("-v", "--verbose", action="store_true", help="tracebacks for checkpoint errors")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dllm_engine.evaluation.run import main

    return main(args)
