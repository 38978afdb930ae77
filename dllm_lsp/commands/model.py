"""`dllm-lsp model logits MODEL --ids FILE --out FILE [--attention-mask FILE]`.

For debugging and parity checks against other implementations: runs one
forward of any supported checkpoint (needs only config.json and the weights)
and writes the raw logits, in the checkpoint's own convention (shifted
families' rows exactly as the forward returns them), to a safetensors file
holding one float32 tensor `logits` [sequences, length, vocab].
Padding (0 in --attention-mask, left padding) is never attended to and
positions start at each row's first real token.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DTYPES = ("float32", "bfloat16", "float16")


def register(subparsers) -> None:
    parser = subparsers.add_parser("model", help="inspect and check model checkpoints")
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION")
    logits = sub.add_parser("logits", help="write the raw forward logits of token-id sequences")
    logits.add_argument("model", help="checkpoint folder, Hugging Face repo id (local cache only), or 'default'")
    logits.add_argument("--ids", required=True, type=Path, help="JSON list of equal-length token-id lists")
    logits.add_argument("--out", required=True, type=Path, help="safetensors file to write (tensor 'logits')")
    logits.add_argument("--attention-mask", type=Path, help="JSON list of 0/1 lists, same shape as --ids")
    logits.add_argument("--device", default="cpu")
    logits.add_argument("--dtype", choices=DTYPES, default="float32")
    logits.set_defaults(func=run)
    parser.set_defaults(func=lambda args: parser.print_help(sys.stderr) or 2)


class InputError(ValueError):
    pass


def read_rows(path: Path, what: str, allowed=None) -> list[list[int]]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    ok = isinstance(data, list) and data and all(isinstance(r, list) and r for r in data)
    if not ok or not all(isinstance(v, int) and not isinstance(v, bool) for r in data for v in r):
        raise InputError(f"{path}: {what} must be a non-empty JSON list of non-empty lists of integers")
    if len({len(r) for r in data}) != 1:
        raise InputError(f"{path}: all {what} rows must have the same length, got {sorted({len(r) for r in data})}")
    if allowed is not None and any(v not in allowed for r in data for v in r):
        raise InputError(f"{path}: {what} values must be 0 or 1")
    return data


def run(args: argparse.Namespace) -> int:
    try:
        ids = read_rows(args.ids, "ids")
        mask = read_rows(args.attention_mask, "attention mask", {0, 1}) if args.attention_mask else None
        if mask is not None and (len(mask) != len(ids) or len(mask[0]) != len(ids[0])):
            raise InputError(f"{args.attention_mask}: shape {len(mask)}x{len(mask[0])} differs from --ids {len(ids)}x{len(ids[0])}")
        if mask is not None and any(sum(r) == 0 for r in mask):
            raise InputError(f"{args.attention_mask}: every row needs at least one 1")
    except InputError as exc:
        print(f"dllm-lsp model logits: {exc}", file=sys.stderr)
        return 2

    from dllm_engine.families.logits_dump import LogitsInputError, dump_logits
    from dllm_engine.model_config import CheckpointError

    try:
        summary = dump_logits(args.model, ids, mask, args.out, device=args.device, dtype=args.dtype)
    except CheckpointError as exc:
        print(f"dllm-lsp model logits: {exc}", file=sys.stderr)
        return 1
    except LogitsInputError as exc:
        print(f"dllm-lsp model logits: {args.ids}: {exc}", file=sys.stderr)
        return 2
    print(summary, file=sys.stderr)
    return 0
