"""`dllm-lsp engine serve`: the resident engine daemon (Unix socket by default)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("engine", help="run or query the resident diffusion engine")
    engine_sub = parser.add_subparsers(dest="engine_command", metavar="ENGINE_COMMAND")
    serve = engine_sub.add_parser("serve", help="serve the engine over HTTP on a Unix socket (or TCP with a token)")
    serve.add_argument("--model", default=None, help="checkpoint folder or HF repo id (default: the embedded model)")
    serve.add_argument("--socket", type=Path, default=None, help="Unix socket path (default: under $XDG_RUNTIME_DIR, one per model: docs/daemon.md)")
    serve.add_argument("--host", default=None, help="listen on TCP instead (needs --token)")
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--token", default=os.environ.get("DLLM_LSP_TOKEN"), help="bearer token for TCP (env DLLM_LSP_TOKEN)")
    serve.add_argument("--device", default="auto")
    serve.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                       help="auto: bf16 on CUDA, fp32 on CPU (bf16 is faster on CPUs with AVX512-BF16/AMX)")
    serve.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    serve.add_argument("--max-batch", type=int, default=32)
    serve.add_argument("--cache-mb", type=int, default=None,
                       help="context K/V cache budget in MiB (default: room for 32 full contexts of the model, "
                            "at most 512; a context evicted is encoded again when its cursor comes back)")
    serve.add_argument("--idle-exit", type=float, default=None, help="exit after this many idle seconds")
    serve.add_argument("--max-body-mb", type=float, default=4.0,
                       help="refuse request bodies over this many MiB with HTTP 413 (default 4)")
    serve.add_argument("--header-timeout", type=float, default=10.0,
                       help="close a connection whose request headers take longer than this many seconds (HTTP 408)")
    serve.add_argument("--served-model-name", action="append", default=[], metavar="NAME",
                       help="a name /v1/models lists for the model (repeatable); clients may ask for any name")
    serve.add_argument("--strict-model-names", action="store_true",
                       help="answer a `model` that is neither the model's own name nor a --served-model-name with 404")
    serve.add_argument("-v", "--verbose", action="store_true")
    serve.set_defaults(func=run_serve)
    parser.set_defaults(func=lambda args: parser.print_help(sys.stderr) or 2)


def run_serve(args: argparse.Namespace) -> int:
    from dllm_lsp.malloc_arenas import tune_malloc

    tune_malloc()  # before any thread: flat memory over a long session
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from dllm_engine.clients import default_socket_path
    from dllm_engine.daemon import serve
    from dllm_engine.openai_api.models import ServedModels

    def factory():
        from dllm_engine.engine import Engine, EngineConfig

        return Engine(EngineConfig(model=args.model, device=args.device, dtype=args.dtype, threads=args.threads,
                                   max_batch=args.max_batch, cache_mb=args.cache_mb))

    tcp = args.host is not None or args.port is not None
    socket_path = None if tcp else (args.socket or default_socket_path(args.model, args.device, args.dtype))
    return serve(factory, socket_path, args.host, args.port, args.token, args.idle_exit,
                 max_body_bytes=int(args.max_body_mb * 2**20), header_timeout_s=args.header_timeout,
                 models=ServedModels(aliases=tuple(args.served_model_name), strict=args.strict_model_names))
