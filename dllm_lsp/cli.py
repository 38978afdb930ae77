"""`dllm-lsp`: one console script, one module per subcommand.

Each module in `dllm_lsp.commands` exposes `register(subparsers)`, which adds
its parser and sets `func`. Command modules import heavy things (torch, the
engine) inside their `run`, so `dllm-lsp serve` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

# Order is the order of `dllm-lsp --help`. `serve` is also the default command.
COMMAND_MODULES = (
    "serve",
    "infill",
    "engine",
    "refactor",
    "train",
    "eval",
    "model",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dllm-lsp",
        description="Code completion and editing with a diffusion language model.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"dllm_lsp.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"dllm_lsp.commands.{name}":
                raise
            continue  # a command not built yet
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["serve", *argv]  # `dllm-lsp` alone speaks LSP on stdio, as editors expect
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except Exception as exc:
        if not _is_checkpoint_error(exc):
            raise  # a bug: its traceback is the report
        # A broken checkpoint is the user's to fix: one line naming the file and the key.
        if getattr(args, "verbose", 0):
            traceback.print_exc()
        print(f"dllm-lsp {args.command}: {exc}" + ("" if getattr(args, "verbose", 0) else
                                                   " (run with -v for the traceback)"), file=sys.stderr)
        return 1


def _is_checkpoint_error(exc: BaseException) -> bool:
    # Looked up, not imported: the CLI loads no engine module it does not need (torch).
    module = sys.modules.get("dllm_engine.model_config")
    return module is not None and isinstance(exc, module.CheckpointError)


if __name__ == "__main__":
    sys.exit(main())
