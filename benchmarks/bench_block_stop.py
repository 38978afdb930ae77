"""Multi-line fills at the start of a block under the engine's stop rules (none, Hole.stop_indent, Hole.stop_repeats, Hole.max_lines), side by side.

Holes (`--kind`): `block` (default), the first line of the body of an `if` / `for` / `while` /
`with` in the standard library (the cursor on that line after its indentation, the rest of the
file as suffix), as the language server's multi-line completion asks for them (64 tokens, no
stop string); `body`, an empty function body (the cursor after the `def` line's Enter and the
body's indentation, the body gone, the code after the function as suffix), as the server asks
for a new block's body (128 tokens). For each hole every arm fills it in turn, with the context
cached (a keystroke's case): per arm, the tokens the engine wrote, the tokens left after the
editor's cuts (shaping's dedent and loop cuts, and its line cap for the `max_lines` arm), passes,
latency (median, p95), and the lines shown (8 or more characters) that stand in the real code
there. Arms: `free` (no stop rule), `stop_indent` (the dedent stop), `stop_repeats` (it and the
loop stop), `max_lines` (those and the line cap, `--max-lines`, as the language server asks),
`code_first` (those and `Hole.banned_starts` as the server asks at an empty body: no comment
or docstring first), `no_docstring` (the quotes banned, comments not). Every arm asks as the
server does for a fill typed into (its end not chosen by reading, `Hole.choose_end` off);
`--invoked` asks as it does for a fill the user invoked (the end chosen; before the thirty-eighth
session every run measured that way).

    python benchmarks/bench_block_stop.py [--kind block|body] [--holes 24] [--threads 2] [--seed 0]
        [--arms free,stop_indent,stop_repeats,max_lines,code_first,no_docstring,unsure_hide=F,unsure_lines=F]
        [--max-lines 4] [--invoked]
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import statistics
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

from _bench_common import cpu_name, pct

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels")]
OPENER = re.compile(r"\s+(if|for|while|with) .*:$")


def block_holes(count: int, seed: int) -> list[tuple[str, str, int, str]]:
    """(prefix, suffix, indent, real code): the cursor after the indentation of a block's first body line."""
    holes = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        for i, line in enumerate(lines[:-2]):
            body = lines[i + 1]
            indent = len(line) - len(line.lstrip()) + 4
            if OPENER.match(line) and len(body) - len(body.lstrip()) == indent and body.strip():
                prefix = "\n".join(lines[:i + 1]) + "\n" + " " * indent
                holes.append((prefix[-3000:], ("\n" + "\n".join(lines[i + 2:]))[:2000], indent,
                              "\n".join(lines[i + 1:i + 21])))
    random.Random(seed).shuffle(holes)
    return holes[:count]


def body_holes(count: int, seed: int) -> list[tuple[str, str, int, str]]:
    """(prefix, suffix, indent, real body): an empty function body, its `def` line typed."""
    holes = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        lines = source.split("\n")
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or not node.end_lineno:
                continue
            first = node.body[0].lineno - 1  # the body's first line (0-based)
            if not lines[first - 1].rstrip().endswith(":"):
                continue  # a body on the def's line, or a comment between them
            indent = len(lines[first]) - len(lines[first].lstrip())
            prefix = "\n".join(lines[:first]) + "\n" + " " * indent
            suffix = "\n" + "\n".join(lines[node.end_lineno:])
            holes.append((prefix[-3000:], suffix[:2000], indent, "\n".join(lines[first:node.end_lineno])))
    random.Random(seed).shuffle(holes)
    return holes[:count]


def parses(prefix: str, kept: str) -> bool:
    """Whether the function, from its `def` line, parses with the fill kept as its body (the
    editor drops a suggestion that does not, after trimming lines off its end)."""
    start = prefix.rfind("\n", 0, prefix.rfind("def ")) + 1
    try:
        ast.parse(textwrap.dedent(prefix[start:] + kept) + "\n")
    except SyntaxError:
        return False
    return True


def right_lines(shown: str, real: str) -> tuple[int, int]:
    """(lines shown that stand in the real code, lines shown), counting lines of 8 or more
    characters (a bare `else:` or `)` matches anything)."""
    real_lines = {line.strip() for line in real.split("\n") if len(line.strip()) >= 8}
    lines = [line.strip() for line in shown.split("\n") if len(line.strip()) >= 8]
    return sum(line in real_lines for line in lines), len(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--holes", type=int, default=24)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", default="free,stop_indent,stop_repeats",
                   help="free: no stop rule; stop_indent: the dedent stop; stop_repeats: it and the loop stop; "
                        "max_lines: those and the line cap")
    p.add_argument("--kind", choices=("block", "body"), default="block")
    p.add_argument("--max-lines", type=int, default=4, help="the max_lines arm's cap (the server's multilineMaxLines)")
    p.add_argument("--invoked", action="store_true",
                   help="ask as for an invoked fill (Hole.choose_end on) instead of a typed one")
    p.add_argument("--dump", help="write each fill (hole, arm, ms, passes, kept text, real code) here as JSON lines")
    args = p.parse_args()
    from dllm_engine.dedent_stop import dedent_cut
    from dllm_engine.repeat_stop import repeat_cut, typed_indent
    from dllm_lsp.syntax.languages import language_named
    from dllm_lsp.syntax.shaping_steps import cap_lines
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    # `code_first`: the language server's ban at an empty body (its emptyBody "code"):
    # no comment, no docstring first; `no_docstring`: the quotes only, comments allowed.
    prose = language_named("python").prose_starts
    bans = {"code_first": prose, "no_docstring": tuple(s for s in prose if s != "#")}
    engine = Engine(EngineConfig(model="default", threads=args.threads))
    def kept_text(text: str, indent: int, typed: str, max_lines: int | None) -> str:
        """What the editor keeps of a fill: shaping's dedent cut, its loop cut, its line cap
        (which closes a docstring it cut)."""
        cut = dedent_cut(text, indent)
        text = text[:cut] if cut >= 0 else text
        cut = repeat_cut(text, typed, final=True)
        text = text[:cut] if cut >= 0 else text
        return cap_lines(text, max_lines, typed) if max_lines else text

    holes = (block_holes if args.kind == "block" else body_holes)(args.holes, args.seed)
    max_tokens = 64 if args.kind == "block" else 128  # the server's multiline / block budgets
    arms = args.arms.split(",")
    stats = {arm: {"ms": [], "passes": 0, "tokens": 0, "kept": 0, "texts": [], "right": 0, "shown": 0, "parse": 0}
             for arm in arms}
    try:
        for prefix, suffix, indent, real in holes:
            for arm in arms:
                # `unsure_hide=F` / `unsure_lines=F`: code_first with Hole.min_token_prob F; an unsure
                # fill shows nothing / its complete lines before the unsure token
                gate, _, floor = arm.partition("=")
                rules = "code_first" if floor else arm
                cap = args.max_lines if rules in ("max_lines", *bans) else None
                req = InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=max_tokens,
                                                stop_indent=None if rules == "free" else indent,
                                                stop_repeats=rules in ("stop_repeats", "max_lines", *bans),
                                                max_lines=cap,
                                                banned_starts=bans.get(rules, ()),
                                                min_token_prob=float(floor) if floor else None,
                                                choose_end=args.invoked)])
                engine.infill(req)  # the context cached, as on a keystroke
                t0 = time.perf_counter()
                h = engine.infill(req).holes[0]
                s = stats[arm]
                s["ms"].append((time.perf_counter() - t0) * 1000)
                s["passes"] += h.passes
                s["tokens"] += h.tokens
                text = h.text
                if h.finish_reason == "unsure":
                    text = "" if gate == "unsure_hide" else text[: text.rfind("\n") + 1].rstrip("\n")
                s["texts"].append(kept := kept_text(text, indent, typed_indent(prefix), cap))
                s["kept"] += len(engine.tokenizer.encode(kept))
                if args.dump:
                    with open(args.dump, "a", encoding="utf-8") as out:
                        out.write(json.dumps({"hole": len(s["ms"]) - 1, "arm": arm, "ms": s["ms"][-1], "passes": h.passes,
                                              "kept": kept, "real": real}) + "\n")
                s["parse"] += parses(prefix, kept)
                right, shown = right_lines(kept, real)
                s["right"] += right
                s["shown"] += shown
    finally:
        engine.shutdown()
    first = stats[arms[0]]["texts"]
    what = "block-start holes" if args.kind == "block" else "empty function bodies"
    asked = "invoked (the end chosen by reading)" if args.invoked else "typed (the end not chosen)"
    print(f"{cpu_name()}, {args.threads} threads, {len(holes)} {what} of the standard library, {max_tokens} tokens, {asked}")
    print(f"| arm | p50 ms | p95 ms | passes/fill | tokens written/fill | tokens kept by the editor's cuts/fill "
          f"| same kept text as {arms[0]} | lines shown that stand in the real code | fills that parse as they stand |")
    print("|---|---|---|---|---|---|---|---|---|")
    for arm, s in stats.items():
        n = len(holes)
        same = sum(a == b for a, b in zip(first, s["texts"]))
        print(f"| {arm} | {statistics.median(s['ms']):.0f} | {pct(s['ms'], 0.95):.0f} | {s['passes'] / n:.1f} "
              f"| {s['tokens'] / n:.1f} | {s['kept'] / n:.1f} | {same}/{n} | {s['right']} of {s['shown']} | {s['parse']}/{n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
