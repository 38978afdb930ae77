"""Cross-file snippets: definitions of imported names found in other open documents.

A diffusion model cannot look up `helper()`'s signature; showing it the
definition (as a comment before the prefix) is the cheapest way to help it.
Bounded by a character budget and a wall-clock budget.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping
from functools import lru_cache
from urllib.parse import unquote, urlparse

import tree_sitter

from dllm_lsp.syntax.languages import LanguageSpec, language_for, parse

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME_FIELDS = ("name", "declarator", "definition", "declaration")
_SNIPPET_LINES = 8  # a signature plus the first lines of a body is enough


def _imported_names(tree: tree_sitter.Tree, language: LanguageSpec) -> set[str]:
    names: set[str] = set()
    for node in tree.root_node.children:
        candidates = [node] if node.type in language.import_types else []
        # Go groups imports; JS/TS wrap them in export statements etc.: one level down.
        candidates += [c for c in node.named_children if c.type in language.import_types]
        for imp in candidates:
            names.update(_IDENT.findall((imp.text or b"").decode("utf-8", "replace")))
    return names


def _definition_name(node: tree_sitter.Node, depth: int = 0) -> str | None:
    """The defined identifier: follows name/declarator fields (C declarators nest)."""
    if depth > 5:
        return None
    if node.type in ("identifier", "type_identifier", "field_identifier", "property_identifier"):
        return (node.text or b"").decode("utf-8", "replace")
    for field in _NAME_FIELDS:
        child = node.child_by_field_name(field)
        if child is not None:
            return _definition_name(child, depth + 1)
    for child in node.named_children:
        if child.type in ("variable_declarator", "type_spec", "const_spec", "function_declarator"):
            return _definition_name(child, depth + 1)
    return None


def _definitions(tree: tree_sitter.Tree, language: LanguageSpec) -> Iterator[tree_sitter.Node]:
    for node in tree.root_node.named_children:
        if node.type in language.definition_types:
            yield node
        else:  # export statements, templates, namespaces: one level down
            for child in node.named_children:
                if child.type in language.definition_types:
                    yield child


@lru_cache(maxsize=64)
def _defined_in(text: str, language: LanguageSpec) -> tuple[tuple[str, str], ...]:
    """(name, source) of the top-level definitions of a document (cached per text)."""
    tree = parse(text, language)
    out = []
    for node in _definitions(tree, language):
        name = _definition_name(node)
        if name:
            out.append((name, (node.text or b"").decode("utf-8", "replace")))
    return tuple(out)


def _file_name(uri: str) -> str:
    return os.path.basename(unquote(urlparse(uri).path) if "://" in uri else uri)


def _stem(uri: str) -> str:
    return os.path.splitext(_file_name(uri))[0]


def _shorten(source: str, limit: int) -> str:
    lines = source.split("\n")
    short = "\n".join(lines[:_SNIPPET_LINES])
    if len(lines) > _SNIPPET_LINES:
        short += "\n..."
    return short[:limit]


def cross_file_snippets(
    text: str,
    language: LanguageSpec,
    tree: tree_sitter.Tree | None,
    open_documents: Mapping[str, str],
    budget_chars: int,
    budget_s: float,
) -> tuple[str, ...]:
    """Snippets "<file name>\\n<definition>" for names this document imports."""
    deadline = time.monotonic() + budget_s
    tree = tree if tree is not None else parse(text, language)
    names = _imported_names(tree, language)
    if not names:
        return ()
    used = set(_IDENT.findall(text))
    snippets: list[str] = []
    left = budget_chars
    for uri, other in open_documents.items():
        if time.monotonic() >= deadline or left <= 0:
            break
        if other is text or other == text:
            continue
        spec = language_for(uri, None) or language
        whole_module = _stem(uri) in names  # `import utils` / `#include "utils.h"`
        for name, source in _defined_in(other, spec):
            if name in names or (whole_module and name in used):
                header = _file_name(uri)
                snippet = f"{header}\n{_shorten(source, left - len(header) - 1)}"
                if len(snippet) <= len(header) + 1 or left - len(snippet) < 0:
                    left = 0
                    break
                snippets.append(snippet)
                left -= len(snippet)
            if time.monotonic() >= deadline:
                break
    return tuple(snippets)
