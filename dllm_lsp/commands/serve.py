"""`dllm-lsp serve`: the language server on stdio (also what `dllm-lsp` alone runs).

stdout carries the protocol and nothing else: logs go to stderr or --log-file.
"""

from __future__ import annotations

import argparse
import logging
import sys

ENGINE_MODES = {"in-process": "inProcess", "daemon": "daemon", "remote": "remote", "openai": "openai"}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="run the language server on stdio (the default)")
    p.add_argument("--engine", choices=sorted(ENGINE_MODES), default=None,
                   help="where the model runs (default: in-process; editors may override in initializationOptions)")
    p.add_argument("--model", default=None, help="checkpoint path (default: the embedded default model)")
    p.add_argument("--url", default=None, help="engine URL for --engine remote|openai")
    p.add_argument("--socket", default=None, help="daemon Unix socket for --engine daemon")
    p.add_argument("--log-file", default=None, help="write logs here instead of stderr")
    p.add_argument("--stdio", action="store_true",
                   help="speak LSP on stdin/stdout (the only transport; accepted because many clients pass it)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    p.set_defaults(func=run)


def base_settings(args: argparse.Namespace) -> dict:
    engine = {}
    if args.engine:
        engine["mode"] = ENGINE_MODES[args.engine]
    for key in ("model", "url", "socket"):
        if getattr(args, key, None):
            engine[key] = getattr(args, key)
    return {"engine": engine} if engine else {}


def setup_logging(log_file: str | None, verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbose < 2:
        logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message at INFO


def run(args: argparse.Namespace) -> int:
    from dllm_lsp.malloc_arenas import tune_malloc

    tune_malloc()  # before any thread: flat memory over a long session
    setup_logging(args.log_file, args.verbose)
    from dllm_lsp.server import create_server

    server = create_server(base_settings(args))
    server.start_io()
    return 0
