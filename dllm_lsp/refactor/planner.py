"""Files -> holes: read each file safely, parse it, find the recipe's sites, cut their contexts.

Everything here is picklable data so files can be planned in a process pool.
A file that cannot be planned becomes a `Skipped` with a reason, never an
exception that stops the run.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path

from dllm_lsp.refactor.recipes import Recipe
from dllm_lsp.refactor.sites import QueryProblem, find_sites
from dllm_lsp.syntax.context import CompletionContext, ContextBudget, range_context
from dllm_lsp.syntax.languages import LanguageSpec, language_for, parse

_BINARY_SNIFF = 8192
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", "target"})
TEMP_SUFFIX = ".dllm-tmp"  # apply.py's temporary files; never planned


@dataclass(frozen=True)
class FileSignature:
    """What the file looked like when read: it is written only if it still looks like this."""

    mtime_ns: int
    size: int
    sha256: str


@dataclass(frozen=True)
class PlannedHole:
    start: int  # str offsets into the original text (replaced span)
    end: int
    before: str  # template text around the hole
    after: str
    position: tuple[int, int, int, int]  # 0-based (line, col, end_line, end_col) in the original
    ctx: CompletionContext  # prefix/suffix cut from the document with the hole opened

    def opened_document(self, text: str) -> tuple[str, int]:
        """The document with this hole opened (template written, span removed) and the hole's offset."""
        offset = self.start + len(self.before)
        return text[: self.start] + self.before + self.after + text[self.end :], offset


@dataclass(frozen=True)
class FilePlan:
    path: str
    text: str
    encoding: str
    language: str
    signature: FileSignature
    holes: tuple[PlannedHole, ...]


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


class SourceError(ValueError):
    """A file that cannot be read as text (the message is the reason)."""


def _encoding_of(raw: bytes, language: LanguageSpec) -> str:
    if raw.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if language.name == "python":  # PEP 263 coding cookie
        try:
            return tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
        except SyntaxError as exc:
            raise SourceError(f"bad encoding declaration: {exc}") from None
    return "utf-8"


def read_source(path: str, language: LanguageSpec) -> tuple[str, str, FileSignature]:
    """(text, encoding, signature); SourceError for unreadable, binary or undecodable files."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            raw = f.read()
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    if b"\0" in raw[:_BINARY_SNIFF]:
        raise SourceError("binary file (NUL bytes)")
    encoding = _encoding_of(raw, language)
    try:
        text = raw.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"cannot decode as {encoding}: {exc}") from None
    if text.encode(encoding) != raw:
        raise SourceError(f"{encoding} does not round-trip this file's bytes")
    return text, encoding, FileSignature(st.st_mtime_ns, st.st_size, hashlib.sha256(raw).hexdigest())


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def plan_file(path: str, recipe: Recipe, budget: ContextBudget = ContextBudget()) -> FilePlan | Skipped:
    language = language_for(path)
    if language is None:
        return Skipped(path, "unknown language (no grammar for this file extension)")
    if language.name not in recipe.languages:
        return Skipped(path, f"recipe {recipe.name} has no rule for {language.name}")
    try:
        text, encoding, signature = read_source(path, language)
        sites = find_sites(text, parse(text, language), recipe, language)
    except (SourceError, QueryProblem) as exc:
        return Skipped(path, str(exc))
    holes = []
    for site in sites:
        hole = PlannedHole(site.start, site.end, site.before, site.after,
                           (*_position(text, site.start), *_position(text, site.end)), ctx=None)  # type: ignore[arg-type]
        doc, offset = hole.opened_document(text)
        ctx = range_context(doc, offset, offset, language, budget)
        bucket = ctx.bucket if ctx.bucket is not None and ctx.bucket <= site.max_tokens else None
        ctx = replace(ctx, kind=site.kind or ctx.kind, reason=recipe.name, max_tokens=site.max_tokens, bucket=bucket)
        holes.append(replace(hole, ctx=ctx))
    return FilePlan(path, text, encoding, language.name, signature, tuple(holes))


def collect_files(paths: list[str], recipe: Recipe) -> tuple[list[str], list[Skipped]]:
    """Files to plan: explicit files as given (checked later), and the recipe's languages under directories.

    Inside directories, files of other languages are not candidates, so they are
    not reported; an explicit path that does not exist is. A symlink whose target
    lies outside every given path is skipped and reported (`--apply` writes
    through symlinks, to their targets: it must never write outside the tree it
    was given); a file reached twice (a symlink to it, the same file named twice)
    is planned once.
    """
    # A folder is a root; a file's root is its folder, so a named symlink is held to the same rule.
    roots = [os.path.realpath(raw if os.path.isdir(raw) else os.path.dirname(os.path.abspath(raw)))
             for raw in paths if os.path.lexists(raw)]
    files: list[str] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()

    def add(path: str) -> None:
        real = os.path.realpath(path)
        if real in seen:
            return
        if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
            skipped.append(Skipped(path, f"symlink to {real}, outside the given paths: not followed"))
            return
        seen.add(real)
        files.append(path)

    for raw in paths:
        if os.path.isdir(raw):
            for root, dirs, names in os.walk(raw):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(names):
                    spec = language_for(name)
                    if spec is not None and spec.name in recipe.languages and not name.endswith(TEMP_SUFFIX):
                        add(os.path.join(root, name))
        elif os.path.lexists(raw):
            add(raw)
        else:
            skipped.append(Skipped(raw, "no such file or directory"))
    return files, skipped
