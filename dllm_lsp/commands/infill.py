"""`dllm-lsp infill FILE --at LINE:COL`: fill a hole in a file from the terminal.

The quickest way to see the engine work: it cuts a hole at the position (or
re-masks `--at`..`--end`), fills it with the model, and prints the filled
region (or the whole file with `--print-file`). Nothing is written to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("infill", help="fill a hole in a file with the model and print the result")
    p.add_argument("file", type=Path)
    p.add_argument("--at", required=True, metavar="LINE:COL", help="1-based line and column of the hole")
    p.add_argument("--end", metavar="LINE:COL", help="re-mask and regenerate the text from --at to here")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--lines", choices=("auto", "single", "multi"), default="auto",
                   help="single: stop at the first newline; auto (default): single when the "
                        "regenerated range lies within one line, as the editor's completions do")
    p.add_argument("--model", default=None, help="default (a pretrained base in our layout), small (the fast "
                   "from-scratch model), a base's name, a checkpoint folder or an HF repo id")
    p.add_argument("--engine", choices=("in-process", "daemon"), default="in-process")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--candidates", type=int, default=2, choices=range(1, 9), metavar="N",
                   help="best of N: fill N ways and print, of the fills ranked by the model's reading of each "
                        "with the code after it, the first that leaves the file with the fewest syntax errors "
                        "(1-8, default 2; models not scored left to right fill once)")
    p.add_argument("--print-file", action="store_true", help="print the whole filled file")
    p.add_argument("--json", action="store_true", help="print the engine's result as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="tracebacks for checkpoint errors")
    p.set_defaults(func=run)


def offset_of(text: str, spec: str) -> int:
    try:
        line_s, col_s = spec.split(":")
        line, col = int(line_s), int(col_s)
    except ValueError:
        raise SystemExit(f"position {spec!r} is not LINE:COL") from None
    lines = text.splitlines(keepends=True)
    if not (1 <= line <= len(lines) + 1):
        raise SystemExit(f"line {line} is outside the file (1..{len(lines)})")
    start = sum(len(l) for l in lines[: line - 1])
    width = len(lines[line - 1].rstrip("\r\n")) if line <= len(lines) else 0
    if not (1 <= col <= width + 1):
        raise SystemExit(f"column {col} is outside line {line} (1..{width + 1})")
    return start + col - 1


def fills_at_selection_depth(hole, text: str, start: int):
    """The hole's fills as the editor's regenerate writes them: at the selection's depth where it
    starts where its line's code does (syntax/indentation.at_selection_depth)."""
    from dllm_lsp.syntax.indentation import at_selection_depth as at_depth

    fills = [at_depth(fill, text, start) for fill in (hole.text, *hole.alternatives)]
    return dataclasses.replace(hole, text=fills[0], alternatives=fills[1:])


def parsing_first(hole, before: str, after: str, path: Path):
    """Best of N's fill to print: the first (best read first) with which the file has the
    fewest syntax errors, as the editor offers it (syntax/fill_choice.py); the others after it."""
    from dllm_lsp.syntax.fill_choice import fewest_errors
    from dllm_lsp.syntax.languages import language_for

    fills = [hole.text, *hole.alternatives]
    best = fewest_errors([before + fill + after for fill in fills], language_for(str(path)))
    if not best:
        return hole
    return dataclasses.replace(hole, text=fills[best], alternatives=fills[:best] + fills[best + 1:])


def run(args: argparse.Namespace) -> int:
    from dllm_engine.clients import DaemonClient, InProcessClient
    from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest

    try:
        text = args.file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"dllm-lsp infill: cannot read {args.file}: {exc}", file=sys.stderr)
        return 1
    start = offset_of(text, args.at)
    end = offset_of(text, args.end) if args.end else start
    if end < start:
        raise SystemExit("--end is before --at")
    single = args.lines == "single" or (args.lines == "auto" and args.end is not None and "\n" not in text[start:end])
    request = InfillRequest(
        holes=[Hole(prefix=text[:start], suffix=text[end:], max_tokens=args.max_tokens,
                    stop=("\n",) if single else ())],
        params=DiffusionParams(threshold=args.threshold, temperature=args.temperature, seed=args.seed,
                               candidates=args.candidates),
    )
    client = InProcessClient(model=args.model) if args.engine == "in-process" else DaemonClient(spawn=True, model=args.model)

    async def go():
        try:
            return await client.infill(request)
        finally:
            await client.close()

    t0 = time.perf_counter()
    result = asyncio.run(go())
    result.holes[0] = parsing_first(fills_at_selection_depth(result.holes[0], text, start), text[:start], text[end:], args.file)
    hole = result.holes[0]
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif args.print_file:
        sys.stdout.write(text[:start] + hole.text + text[end:])
    else:
        print(hole.text)
    print(f"[{result.model}: {hole.tokens} tokens in {hole.passes} passes, {hole.finish_reason}; "
          f"{result.elapsed_ms:.0f} ms engine, {1000 * (time.perf_counter() - t0):.0f} ms with model load]",
          file=sys.stderr)
    return 0
