"""`dllm-lsp refactor PATHS... --recipe NAME`: fill or rewrite spans across a codebase, headless.

Prints a unified diff by default; `--apply` writes files atomically; `--check`
exits 1 when anything would change (for CI). Files that cannot be handled
are reported on stderr with a reason and the run goes on.

Exit codes: 0 done (no changes with --check); 1 --check found changes;
2 usage error (bad arguments, unreadable or invalid recipe); 3 some files
were skipped or not written (and, with --check, nothing would change);
4 with --check: some holes stay unfilled (their fill was rejected: the marker
or placeholder is still there), whether or not other holes would change;
130 interrupted (Ctrl-C or SIGTERM: every file is wholly old or wholly new,
and a rerun resumes because filled holes no longer match the recipe;
with --journal FILE also for `regenerate`).
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_CHANGES, EXIT_USAGE, EXIT_SKIPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130  # 4: session.EXIT_UNFILLED
BUILTINS = ("fill-bodies", "fill-markers", "add-return-types", "add-type-hints", "add-docstrings", "regenerate")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refactor", help="fill holes / rewrite spans across files with the model (diff, --apply, --check)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", help="files and folders (folders: files of the recipe's languages)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--recipe", choices=BUILTINS, help="a built-in recipe")
    which.add_argument("--recipe-file", metavar="TOML", help="a recipe in TOML (see dllm_lsp/refactor/recipes.py)")
    p.add_argument("--query", help="regenerate: tree-sitter query whose @CAPTURE matches are re-masked")
    p.add_argument("--capture", default="hole", help="regenerate: the capture to re-mask (default: hole)")
    p.add_argument("--lang", action="append", help="regenerate: languages the query is for (repeatable)")
    p.add_argument("--marker", default=None, help="fill-markers: the hole marker text (default: <FILL>)")
    p.add_argument("--max-tokens", type=int, default=None, help="override the recipe's tokens per hole")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="write the files (atomically, if unchanged since read)")
    mode.add_argument("--check", action="store_true", help="exit 1 when there would be changes (prints the diff)")
    p.add_argument("-q", "--quiet", action="store_true", help="no diff on stdout")
    p.add_argument("--report", metavar="FILE", help="write a JSON report, one entry per hole")
    p.add_argument("--journal", metavar="FILE", help="with --apply: record rewritten files; a rerun skips them "
                   "(resumes `regenerate`, whose matches never run out)")
    p.add_argument("--engine", choices=("in-process", "daemon"), default="in-process")
    p.add_argument("--model", default=None, help="checkpoint folder or HF repo id (default: the embedded model)")
    p.add_argument("--socket", default=None, help="daemon socket path (with --engine daemon)")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--candidates", type=int, default=1, metavar="N",
                   help="best of N per hole (1-8): N fills, the one the model reads best with the code after it")
    p.add_argument("--canvas-cache", choices=("exact", "delayed"), default="delayed",
                   help="delayed (default): keep committed slots' keys/values instead of recomputing them "
                        "every pass (fewer FLOPs per pass, approximate); exact: recompute every slot "
                        "(see dllm_lsp/refactor/README.md)")
    p.add_argument("--batch-holes", type=int, default=64, help="holes per engine request (1..64)")
    p.add_argument("--files-in-flight", type=int, default=32,
                   help="files in the engine at once (enough to fill the engine's batch of canvases)")
    p.add_argument("--jobs", type=int, default=None, help="processes parsing files (default: CPUs, at most 8)")
    p.add_argument("--prefix-tokens", type=int, default=768)
    p.add_argument("--suffix-tokens", type=int, default=256)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("--ray", metavar="ADDRESS", help="shard files over a Ray cluster (\"local\" starts one here)")
    p.add_argument("--ray-workers", type=int, default=2, help="engine workers on the Ray cluster")
    p.set_defaults(func=run)


def _usage(msg: str) -> int:
    print(f"dllm-lsp refactor: {msg}", file=sys.stderr)
    return EXIT_USAGE


def _recipe(args):
    from dllm_lsp.refactor.builtin_recipes import DEFAULT_MARKER, builtin_recipe, regenerate_recipe
    from dllm_lsp.refactor.recipes import load_recipe_file

    if args.recipe_file:
        return load_recipe_file(args.recipe_file)
    if args.recipe == "regenerate":
        if not args.query:
            raise ValueError("--recipe regenerate needs --query '(...) @hole'")
        return regenerate_recipe(args.query, args.capture, args.lang, args.max_tokens or 64)
    return builtin_recipe(args.recipe, args.marker or DEFAULT_MARKER)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses

    from dllm_engine.protocol import DiffusionParams, ProtocolError

    from dllm_lsp.refactor.journal import Journal
    from dllm_lsp.refactor.planner import collect_files
    from dllm_lsp.refactor.recipes import RecipeError
    from dllm_lsp.refactor.runner import RunOptions, default_jobs
    from dllm_lsp.syntax.context import ContextBudget

    try:
        recipe = _recipe(args)
        if args.max_tokens is not None:
            recipe = dataclasses.replace(recipe, max_tokens=args.max_tokens,
                                         rules=tuple(dataclasses.replace(r, max_tokens=None) for r in recipe.rules))
        params = DiffusionParams(threshold=args.threshold, temperature=args.temperature, seed=args.seed,
                                 canvas_cache=args.canvas_cache, candidates=args.candidates)
        params.validate()
        if not 1 <= args.batch_holes <= 64:
            raise ValueError("--batch-holes must be in [1, 64]")
        if args.batch_holes * args.candidates > 256:
            raise ValueError("--batch-holes x --candidates must be at most 256 (the engine's fills per request)")
        if args.max_tokens is not None and not 1 <= args.max_tokens <= 1024:
            raise ValueError("--max-tokens must be in [1, 1024]")
        if args.journal and not args.apply:
            raise ValueError("--journal only makes sense with --apply")
    except (RecipeError, ProtocolError, ValueError) as exc:
        return _usage(str(exc))
    files, missing = collect_files(args.paths, recipe)
    options = RunOptions(
        apply=args.apply, params=params, max_holes_per_request=args.batch_holes,
        files_in_flight=max(1, args.files_in_flight), jobs=args.jobs or default_jobs(),
        budget=ContextBudget(prefix_tokens=args.prefix_tokens, suffix_tokens=args.suffix_tokens),
        progress=sys.stderr.isatty() if args.progress is None else args.progress,
        journal=Journal(args.journal, recipe) if args.journal else None,
    )
    from dllm_lsp.refactor.ray_shard import RayUnavailable
    from dllm_lsp.refactor.session import run_session

    try:
        return run_session(args, recipe, files, missing, options)
    except RayUnavailable as exc:
        return _usage(str(exc))
    except KeyboardInterrupt:
        print("dllm-lsp refactor: interrupted; every file is wholly old or wholly new; rerun to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
