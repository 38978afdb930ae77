"""A refactor workload cut from real code: Python standard-library modules with some
function bodies replaced by `...`, for `fill-bodies` to fill.

The fixture repository's files are a few hundred bytes, so each hole's context is tens of
tokens, and its copies repeat the same contexts (the engine's prefix cache serves them).
Here every hole sits in a real module of this interpreter's standard library with its own
full context window, as in a real codebase. Deterministic: a fixed module list, the first
functions with enough body to cut, bottom to top so line numbers stay valid.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

# Plain-Python modules present in every CPython 3.11+ install, none of them HumanEval.
MODULES = ("textwrap", "shlex", "glob", "fnmatch", "bisect", "heapq", "colorsys", "calendar",
           "difflib", "fractions", "string", "base64", "quopri", "uu", "netrc", "mailcap",
           "getopt", "gettext", "ipaddress", "statistics", "tabnanny", "shutil", "tempfile",
           "zipapp", "copy", "pprint", "reprlib", "numbers", "graphlib", "dataclasses")


def _bodies(tree: ast.Module, per_file: int) -> list[tuple[int, int, int]]:
    """(first line, last line, indent) of function bodies to cut: at least two statements
    after any docstring, one line per statement at most (no body on the def line)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
            body = body[1:]  # keep the docstring: it is part of the context
        if len(body) < 2 or body[0].lineno == node.lineno:
            continue
        out.append((body[0].lineno, node.end_lineno, body[0].col_offset))
    out.sort()
    chosen, last_end = [], 0
    for first, end, indent in out:  # no nested cuts
        if first > last_end:
            chosen.append((first, end, indent))
            last_end = end
        if len(chosen) == per_file:
            break
    return chosen


def write_workload(out: Path, files: int, holes_per_file: int) -> int:
    """Write `files` modules with up to `holes_per_file` bodies cut each; returns the hole count."""
    holes = 0
    for name in MODULES[:files]:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        source = Path(spec.origin).read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        cuts = _bodies(ast.parse(source), holes_per_file)
        for first, end, indent in reversed(cuts):
            lines[first - 1:end] = [" " * indent + "...\n"]
        (out / f"{name}.py").write_text("".join(lines), encoding="utf-8")
        holes += len(cuts)
    return holes
