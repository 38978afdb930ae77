"""`python -m dllm_engine.training`: the trainer without the language-server package (GPU machines)."""

from __future__ import annotations

import argparse
import sys

from .args import add_arguments


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dllm_engine.training", description="Train a native diffusion model.")
    add_arguments(p)
    args = p.parse_args(argv)
    from . import run

    if args.tokenizer is None:
        args.tokenizer = str(run.DEFAULT_TOKENIZER)
    return run.main(args)


if __name__ == "__main__":
    sys.exit(main())
