"""What cross-file snippets are worth to the default model: one-line holes cut from this
repository's own code (newer than the base, in no training corpus) where the line uses a name
imported from another of its modules, with that module open in the editor, filled the way the
language server fills there (`completion_context` -> `engine_hole` -> `request_for`; the cursor
rests on the emptied line, where the server asks a multi-line fill, and its first line is
compared), under several context budgets. Paired on the same holes: exact match of the line,
edit similarity and identifier F1 (CrossCodeEval's measures).

    python benchmarks/bench_cross_file.py --holes 300 --out A.json [--offset 0 --every 2]
    python benchmarks/bench_cross_file.py --report A.json B.json   # merge halves, print the table

Arms (`--arms`): `none` (the server's default: no snippets, a prefix window of 768 tokens),
`snippets` (`context.snippetTokens` 256: snippets as comments before the prefix, taking their
room out of its window) and `short` (the window shortened by 256 tokens, no snippets: what the
shorter prefix alone does). `--model` names the model (a larger one may use snippets where the
default does not).
The holes are drawn from the repository's code as it is (seeded), so the sample changes with
the code: compare arms within one run, or pass `--rev COMMIT` to draw them from that commit's
code (`git archive`), the same sample on any later checkout. Fills do not depend on load: two
processes may run side by side.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

from _bench_common import sources_at

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"dllm_lsp": "dllm_lsp", "dllm_engine": "engine/dllm_engine"}
PACKAGES = {name: ROOT / folder for name, folder in PACKAGE_DIRS.items()}


IMPORT = re.compile(r"^from (\.+|dllm_lsp\b|dllm_engine\b)([\w.]*) import (\([^)]*\)|[^\n#]*)", re.M)
NAME = re.compile(r"[A-Za-z_]\w*")


def local_imports(path: Path, text: str, packages: dict[str, Path] = PACKAGES) -> tuple[dict[str, str], set[str]]:
    """({module file: its text} of this repository's modules the file imports from, the names imported)."""
    files, names = {}, set()
    for m in IMPORT.finditer(text):
        head, rest, imported = m.groups()
        if head.startswith("."):
            base = path.parent
            for _ in range(len(head) - 1):
                base = base.parent
            module = rest
        else:
            base, module = packages[head], rest.lstrip(".")
        target = base / (module.replace(".", "/") + ".py") if module else base / "__init__.py"
        if target.exists() and target != path:
            files[str(target)] = target.read_text(encoding="utf-8")
            names.update(n for n in NAME.findall(imported) if n != "as")
    return files, names


def one_line_statements(text: str) -> set[int]:
    """0-based numbers of the lines that hold one whole simple statement (no docstring)."""
    lines = set()
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.stmt) and node.lineno == node.end_lineno
                and not isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                                          ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try))
                and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))):
            lines.add(node.lineno - 1)
    return lines


def cut_holes(count: int, seed: int, root: Path = ROOT) -> list[dict]:
    """One-line statements that use an imported local name, cut after their indentation (the
    cursor where a typist starts the line; the rest of the file stays as the suffix), from the
    packages under `root` (this checkout, or _bench_common.sources_at's folder)."""
    holes = []
    packages = {name: root / folder for name, folder in PACKAGE_DIRS.items()}
    for package in packages.values():
        for path in sorted(package.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            opens, names = local_imports(path, text, packages)
            # Named as in the repository, wherever it lies: the snippets' headers name the file.
            opens = {str(Path(name).relative_to(root)): body for name, body in opens.items()}
            if not names:
                continue
            statements = one_line_statements(text)
            offset = 0
            for i, line in enumerate(text.splitlines(keepends=True)):
                code = line.strip()
                if i in statements and 8 <= len(code) <= 100 and set(NAME.findall(code)) & names:
                    at = offset + len(line) - len(line.lstrip())
                    holes.append({"file": str(path.relative_to(root)), "at": at, "line": code,
                                  "text": text[:at] + text[at + len(code):], "opens": opens})
                offset += len(line)
    random.Random(seed).shuffle(holes)
    return holes[:count]


def budgets(arms: list[str]):
    from dllm_lsp.syntax.context import ContextBudget

    full, snippet_tokens = ContextBudget(), 256
    table = {"none": full, "snippets": ContextBudget(snippet_tokens=snippet_tokens),
             "short": ContextBudget(prefix_tokens=full.prefix_tokens - snippet_tokens)}
    return {arm: table[arm] for arm in arms}


def run(a) -> None:
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.runner import trim_to_trained
    from dllm_lsp.server.infill import engine_hole, request_for
    from dllm_lsp.server.options import ServerOptions
    from dllm_lsp.syntax.context import completion_context
    from dllm_lsp.syntax.languages import language_named

    py = language_named("python")
    arms = budgets(a.arms.split(","))
    options = ServerOptions()
    engine = Engine(EngineConfig(model=a.model, threads=a.threads))
    tok = engine.tokenizer
    room = int(engine.loaded.config.extra.get("context_tokens") or 1024) - 2  # as the runner trims (runner.py)
    rows = []
    try:
        with sources_at(ROOT, a.rev, list(PACKAGE_DIRS.values())) as root:
            holes = cut_holes(a.holes, a.seed, root)  # the holes hold their texts
        for k, h in enumerate(holes[a.offset::a.every]):
            row = {"file": h["file"], "line": h["line"]}
            for arm, budget in arms.items():
                ctx = completion_context(h["text"], h["at"], py, budget, None, h["opens"])
                if ctx.kind == "none":
                    break
                hole = engine_hole(ctx, py, ctx.max_tokens, ctx.bucket)
                snippet_chars = len(hole.prefix) - len(ctx.prefix)
                prefix_ids = tok.encode(hole.prefix)
                kept = trim_to_trained(prefix_ids, tok.encode(hole.suffix), room)[0] == prefix_ids
                res = engine.infill(request_for([hole], options)).holes[0]
                fill = res.text.split("\n")[0].strip()
                row[arm] = {"fill": fill, "exact": fill == h["line"], "snippets": len(ctx.snippets),
                            "snippet_chars": snippet_chars, "all_reach_model": kept, "passes": res.passes}
            if len(row) > 2:
                rows.append(row)
            print(f"{k}: {h['line']!r} " + " ".join(f"{arm}={row[arm]['exact']:d}" for arm in arms if arm in row),
                  file=sys.stderr, flush=True)
    finally:
        engine.shutdown()
    Path(a.out).write_text(json.dumps(rows, indent=1))


def identifier_f1(fill: str, line: str) -> float:
    """F1 of the identifiers the fill and the line use (CrossCodeEval's identifier match)."""
    a, b = Counter(NAME.findall(fill)), Counter(NAME.findall(line))
    common = sum((a & b).values())
    return 0.0 if not common else 2 * common / (sum(a.values()) + sum(b.values()))


def report(paths: list[str]) -> None:
    rows = [r for p in paths for r in json.loads(Path(p).read_text())]
    arms = [arm for arm in ("none", "snippets", "short") if all(arm in r for r in rows)]
    print(f"{len(rows)} holes; exact match (won / lost against `none`), edit similarity and identifier F1 "
          "(means), holes with snippets sent, holes whose whole context reached the model")
    print("| arm | exact | won / lost | edit similarity | identifier F1 | with snippets | context kept whole |")
    print("|---|---|---|---|---|---|---|")
    for arm in arms:
        c = Counter()
        for r in rows:
            fill, line = r[arm]["fill"], r["line"]
            c["exact"] += r[arm]["exact"]
            c["won"] += r[arm]["exact"] and not r["none"]["exact"]
            c["lost"] += r["none"]["exact"] and not r[arm]["exact"]
            c["es"] += difflib.SequenceMatcher(None, fill, line).ratio()
            c["f1"] += identifier_f1(fill, line)
            c["snip"] += r[arm]["snippets"] > 0
            c["kept"] += r[arm]["all_reach_model"]
        n = len(rows)
        print(f"| {arm} | {c['exact']} ({100 * c['exact'] / n:.1f}%) | {c['won']} / {c['lost']} | "
              f"{c['es'] / n:.3f} | {c['f1'] / n:.3f} | {c['snip']} | {c['kept']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arms", default="none,snippets,short")
    ap.add_argument("--model", default="default")
    ap.add_argument("--rev", help="draw the holes from this commit's code (the same sample on any checkout)")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--report", nargs="+", metavar="JSON")
    a = ap.parse_args()
    if a.report:
        report(a.report)
    elif not a.out:
        ap.error("--out (or --report)")
    else:
        run(a)


if __name__ == "__main__":
    main()
