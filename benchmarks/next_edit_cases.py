"""Edit sequences for the next-edit benchmark, cut from real code and real history.

Mechanical multi-site edits on modules of this interpreter's standard library
(`stdlib_workload.MODULES`), found with `ast`, applied one site at a time as a
user would (the definition first, then the other sites in file order):
- rename_param: a parameter renamed at the definition; the next edits are its uses;
- rename_local: a local variable renamed at its first assignment; then its other uses;
- rename_function: a module-level function renamed at its `def`; then its calls in the file;
- add_param: a parameter added at the end of a definition; then `, name` at each call;
- swap_call: one call of a function made a call of another (no follow-up: false proposals).
History pairs: two hunks of one Python file in one commit of a git history
(this repository's own, /work/main by default): the first hunk is the user's edit,
the second the true next one. After the last site (or hunk) no follow-up is needed:
those steps measure false proposals.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from stdlib_workload import MODULES

MAX_FUNCTION_LINES = 40
MAX_SITES = 6


@dataclass(frozen=True)
class Site:
    start: int  # str offsets in the original text
    end: int
    new: str


@dataclass
class Case:
    kind: str
    source: str  # module or commit:path
    text: str  # the original text
    sites: list[Site]  # the first is the user's edit; the rest follow (file order)


@dataclass
class Step:
    kind: str
    source: str
    before: str  # the text before the user's edit
    after: str  # the text the server sees (the edit applied)
    edits: list[tuple[int, str, str]]  # (offset in `after`, removed, inserted), newest last
    remaining: list[Site] = field(default_factory=list)  # in `after` offsets; [] = no follow-up

    @property
    def follow_up(self) -> bool:
        return bool(self.remaining)


def _apply(text: str, sites: list[Site]) -> str:
    out, last = [], 0
    for s in sorted(sites, key=lambda s: s.start):
        out += [text[last:s.start], s.new]
        last = s.end
    return "".join(out) + text[last:]


def _shift(sites: list[Site], done: list[Site]) -> list[Site]:
    """`sites` in the coordinates of the text with `done` applied."""
    out = []
    for s in sites:
        delta = sum(len(d.new) - (d.end - d.start) for d in done if d.end <= s.start)
        out.append(Site(s.start + delta, s.end + delta, s.new))
    return out


def steps_of(case: Case) -> list[Step]:
    """One step per site: its edit applied, the later sites still to do."""
    steps = []
    for k in range(len(case.sites)):
        done = case.sites[:k + 1]
        before = _apply(case.text, case.sites[:k])
        after = _apply(case.text, done)
        edits = []
        for j, site in enumerate(done):  # each edit in `after` coordinates, with what it removed
            [moved] = _shift([site], [d for d in done if d is not site])
            edits.append((moved.start, case.text[site.start:site.end], site.new))
        steps.append(Step(case.kind, case.source, before, after, edits, _shift(case.sites[k + 1:], done)))
    return steps


# ---------------------------------------------------------------- mechanical


def _offsets(text: str) -> list[int]:
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    return starts


def _at(starts: list[int], line: int, col: int) -> int:
    return starts[line - 1] + col


def _names(node: ast.AST, name: str) -> list[ast.Name]:
    return sorted((n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name),
                  key=lambda n: (n.lineno, n.col_offset))


def _bound_otherwise(fn: ast.AST, name: str, params_too: bool = False) -> bool:
    """Whether `name` is also bound in `fn` by something other than a plain `Name`: a nested
    `def`/`class`, a nested function's or lambda's parameter, an import, `except ... as`,
    `global`/`nonlocal`. Renaming only the `Name` uses would then change what the code does
    (`textwrap.indent`'s `predicate` is rebound by a nested `def predicate(line)`), so the
    `ast` truth would be wrong: such names make no case."""
    for node in ast.walk(fn):
        if node is not fn and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == name:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and (node is not fn or params_too):
            a = node.args
            if name in {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}:
                return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
        if isinstance(node, ast.ExceptHandler) and node.name == name:
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return True
    return False


def _functions(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES:
            yield node


def _def_name_offset(text: str, starts: list[int], fn: ast.FunctionDef) -> int:
    line_start = _at(starts, fn.lineno, 0)
    m = re.compile(rf"def\s+({re.escape(fn.name)})\b").search(text, line_start)
    return m.start(1)


def rename_param_cases(module: str, text: str, tree: ast.Module) -> list[Case]:
    starts, out = _offsets(text), []
    for fn in _functions(tree):
        for arg in fn.args.args + fn.args.kwonlyargs:
            if arg.arg in ("self", "cls"):
                continue
            uses = [n for n in _names(fn, arg.arg)]
            if not (2 <= len(uses) <= MAX_SITES - 1) or any(isinstance(n, ast.Name) and n.lineno == fn.lineno for n in uses):
                continue
            if _bound_otherwise(fn, arg.arg):
                continue
            new = f"{arg.arg}_value"
            a = _at(starts, arg.lineno, arg.col_offset)
            sites = [Site(a, a + len(arg.arg), new)] + [
                Site(_at(starts, n.lineno, n.col_offset), _at(starts, n.lineno, n.col_offset) + len(arg.arg), new)
                for n in uses]
            out.append(Case("rename_param", f"{module}.{fn.name}", text, sites))
            break
    return out


def rename_local_cases(module: str, text: str, tree: ast.Module) -> list[Case]:
    starts, out = _offsets(text), []
    for fn in _functions(tree):
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        seen: set[str] = set()
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)) or node.id in params | seen:
                continue
            seen.add(node.id)
            uses = _names(fn, node.id)
            if not (3 <= len(uses) <= MAX_SITES) or uses[0] is not node or _bound_otherwise(fn, node.id, True):
                continue
            new = f"{node.id}_value"
            out.append(Case("rename_local", f"{module}.{fn.name}", text, [
                Site(_at(starts, n.lineno, n.col_offset), _at(starts, n.lineno, n.col_offset) + len(node.id), new)
                for n in uses]))
            break
    return out


def _calls(tree: ast.Module, name: str) -> list[ast.Call]:
    return sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and n.func.id == name), key=lambda n: (n.lineno, n.col_offset))


def rename_function_cases(module: str, text: str, tree: ast.Module) -> list[Case]:
    starts, out = _offsets(text), []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        calls = _calls(tree, fn.name)
        if not (1 <= len(calls) <= MAX_SITES - 1) or len(_names(tree, fn.name)) != len(calls):
            continue  # every use a call: no reference passed around we would miss
        new = f"{fn.name}_impl"
        d = _def_name_offset(text, starts, fn)
        sites = [Site(d, d + len(fn.name), new)] + [
            Site(_at(starts, c.lineno, c.func.col_offset), _at(starts, c.lineno, c.func.col_offset) + len(fn.name), new)
            for c in calls]
        out.append(Case("rename_function", f"{module}.{fn.name}", text, sorted(sites[1:], key=lambda s: s.start)))
        out[-1].sites.insert(0, sites[0])
    return out


def add_param_cases(module: str, text: str, tree: ast.Module) -> list[Case]:
    starts, out = _offsets(text), []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs or not a.args:
            continue
        calls = _calls(tree, fn.name)
        if not (1 <= len(calls) <= MAX_SITES - 1) or any(
                c.keywords or not c.args or any(isinstance(x, ast.Starred) for x in c.args) or c.lineno != c.end_lineno
                for c in calls):
            continue
        last = a.args[-1]
        d = _at(starts, last.end_lineno, last.end_col_offset)
        sites = [Site(d, d, ", context")] + [
            Site(_at(starts, c.args[-1].end_lineno, c.args[-1].end_col_offset),
                 _at(starts, c.args[-1].end_lineno, c.args[-1].end_col_offset), ", context") for c in calls]
        out.append(Case("add_param", f"{module}.{fn.name}", text, sites))
    return out


def swap_call_cases(module: str, text: str, tree: ast.Module) -> list[Case]:
    """An edit that needs no follow-up: one call of a module-level function `f` (called at
    least twice) made a call of another module-level function `g` with as many parameters.
    `f` still exists and its other calls stay right, so the name `f` the edit removed is not
    stale anywhere: a proposal here renames what the user did not (the false-proposal test of
    the rename seeds, where every mechanical case's last step has no stale use left)."""
    starts, out = _offsets(text), []
    arity = {fn.name: len(fn.args.args) for fn in tree.body if isinstance(fn, ast.FunctionDef)
             and not (fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.defaults)}
    for name, n in arity.items():
        calls = [c for c in _calls(tree, name) if len(c.args) == n and not c.keywords]
        other = next((g for g, m in arity.items() if g != name and m == n), None)
        if len(calls) < 2 or other is None:
            continue
        c = calls[0]
        a = _at(starts, c.lineno, c.func.col_offset)
        out.append(Case("swap_call", f"{module}.{name}->{other}", text, [Site(a, a + len(name), other)]))
    return out


KINDS = {"rename_param": rename_param_cases, "rename_local": rename_local_cases,
         "rename_function": rename_function_cases, "add_param": add_param_cases, "swap_call": swap_call_cases}


# Modules for choosing thresholds (benchmarks/calibrate_next_edit.py): none is in MODULES,
# so nothing is tuned on the benchmark's own cases.
CALIBRATION_MODULES = ("optparse", "configparser", "tokenize", "locale", "mimetypes", "sched", "wave",
                       "ftplib", "smtplib", "zipfile", "tarfile", "csv", "webbrowser", "plistlib")


def mechanical_cases(per_kind: int, modules: tuple[str, ...] = MODULES) -> list[Case]:
    assert modules is MODULES or not set(modules) & set(MODULES), "calibration cases must not be evaluation cases"
    by_kind: dict[str, list[Case]] = {k: [] for k in KINDS}
    for module in modules:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        text = Path(spec.origin).read_text(encoding="utf-8")
        if not text.isascii():  # ast columns are UTF-8 bytes: keep str offsets equal to them
            continue
        tree = ast.parse(text)
        for kind, find in KINDS.items():
            if len(by_kind[kind]) < per_kind:
                by_kind[kind] += find(module, text, tree)[:max(1, per_kind // 6)]
    return [c for cases in by_kind.values() for c in cases[:per_kind]]


# ---------------------------------------------------------------- history


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def history_cases(repo: Path, limit: int, max_hunk_lines: int = 6, max_gap_lines: int = 40) -> list[Case]:
    """Pairs of small hunks, close to each other, in one Python file of one commit."""
    log = subprocess.run(["git", "-C", str(repo), "log", "--no-merges", "-U0", "--format=@commit %H %P",
                          "-p", "--", "*.py"], capture_output=True, text=True, check=True).stdout
    out: list[Case] = []
    commit = parent = path = None
    hunks: list[tuple[int, int, int, int]] = []

    def flush() -> None:
        if commit and parent and path and len(hunks) == 2 and len(out) < limit:
            case = _history_case(repo, commit, parent, path, hunks, max_hunk_lines, max_gap_lines)
            if case is not None:
                out.append(case)

    for line in log.splitlines():
        if line.startswith("@commit "):
            flush()
            parts = line.split()
            commit, parent, path, hunks = parts[1], (parts[2] if len(parts) > 2 else None), None, []
        elif line.startswith("diff --git "):
            flush()
            path, hunks = line.split(" b/", 1)[1], []
        elif (m := HUNK.match(line)) is not None:
            old_n = 1 if m.group(2) is None else int(m.group(2))
            new_n = 1 if m.group(4) is None else int(m.group(4))
            hunks.append((int(m.group(1)), old_n, int(m.group(3)), new_n))
    flush()
    return out


def _history_case(repo, commit, parent, path, hunks, max_hunk_lines, max_gap_lines) -> Case | None:
    (o1, n1, p1, m1), (o2, n2, p2, m2) = hunks
    if max(n1, m1, n2, m2) > max_hunk_lines or o2 - (o1 + n1) > max_gap_lines:
        return None
    try:
        old = subprocess.run(["git", "-C", str(repo), "show", f"{parent}:{path}"], capture_output=True,
                             text=True, check=True).stdout
        new = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True,
                             text=True, check=True).stdout
    except (subprocess.CalledProcessError, UnicodeDecodeError):
        return None
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    starts = [0]
    for line in old_lines:
        starts.append(starts[-1] + len(line))
    sites = []
    for o, n, p, m in hunks:
        first = o if n else o + 1  # a pure insertion goes after old line `o`
        a = starts[min(first - 1, len(old_lines))]
        b = starts[min(first - 1 + n, len(old_lines))]
        sites.append(Site(a, b, "".join(new_lines[p - 1:p - 1 + m]) if m else ""))
    if _apply(old, sites) != new:
        return None
    return Case("history_pair", f"{commit[:10]}:{path}", old, sites)
