"""`python -m dllm_engine.evaluation`: the harness without the language-server package (GPU machines)."""

from __future__ import annotations

import argparse
import sys

from .args import add_arguments


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dllm_engine.evaluation", description="Evaluate an infilling model.")
    add_arguments(p)
    args = p.parse_args(argv)
    from .run import main as run_main

    return run_main(args)


if __name__ == "__main__":
    sys.exit(main())
