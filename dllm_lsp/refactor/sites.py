"""Where a recipe cuts or inserts holes in one parsed file.

`find_sites` runs the recipe's rules for the file's language and returns
non-overlapping `Site`s: the span of the original text the hole replaces and
the template text written around the hole.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from string import Template

import tree_sitter

from dllm_lsp.refactor.recipes import TEMPLATE_BUILTINS, Recipe, Rule
from dllm_lsp.syntax.indentation import indent_unit, leading
from dllm_lsp.syntax.languages import LanguageSpec, grammar_for


class QueryProblem(ValueError):
    """A rule's query does not compile for a language, or its template names a missing capture."""


@dataclass(frozen=True)
class Site:
    start: int  # str offsets into the original text: the hole replaces text[start:end]
    end: int
    before: str  # template text written before the hole ...
    after: str  # ... and after it
    max_tokens: int
    kind: str | None = None  # the rule's completion kind, if it fixes one


@lru_cache(maxsize=256)
def compiled_query(query: str, language: LanguageSpec, template: str) -> tree_sitter.Query:
    try:
        compiled = tree_sitter.Query(grammar_for(language), query)
    except (tree_sitter.QueryError, ValueError) as exc:
        raise QueryProblem(f"query does not compile for {language.name}: {exc}") from None
    captures = {compiled.capture_name(i) for i in range(compiled.capture_count)}
    missing = set(Template(template).get_identifiers()) - TEMPLATE_BUILTINS - captures
    if missing:
        raise QueryProblem(f"template names ${{{', '.join(sorted(missing))}}} but the query captures only "
                           f"{', '.join('@' + c for c in sorted(captures))}")
    return compiled


class _Offsets:
    """Byte offsets (tree-sitter) to str offsets (Python), for one text."""

    def __init__(self, text: str) -> None:
        self.source = text.encode("utf-8", "surrogatepass")
        self.ascii = len(self.source) == len(text)

    def __call__(self, byte: int) -> int:
        return byte if self.ascii else len(self.source[:byte].decode("utf-8", "surrogatepass"))


def _line_indent(text: str, offset: int) -> str:
    return leading(text[text.rfind("\n", 0, offset) + 1 : offset + 1])


def _span(node: tree_sitter.Node, action: str, to_str: _Offsets) -> tuple[int, int]:
    if action == "before":
        return (to_str(node.start_byte),) * 2
    if action == "after":
        return (to_str(node.end_byte),) * 2
    if action == "inner" and node.child_count >= 2:
        children = node.children
        start = children[0].end_byte  # after the opening bracket ...
        for child in children[1:-1]:  # ... and after the comments that open the body
            if "comment" not in child.type:
                break
            start = child.end_byte
        return to_str(start), to_str(children[-1].start_byte)
    return to_str(node.start_byte), to_str(node.end_byte)


def _expand(rule: Rule, fields: dict[str, str], newline: str) -> tuple[str, str]:
    before, after = rule.template_parts()
    parts = [Template(p).substitute(fields).replace("\n", newline) for p in (before, after)]
    return parts[0], parts[1]


def _query_sites(text: str, tree, rule: Rule, recipe: Recipe, language: LanguageSpec, to_str: _Offsets):
    query = compiled_query(rule.query, language, rule.template)
    unit = indent_unit(text)
    newline = "\r\n" if "\r\n" in text else "\n"
    for _, captures in tree_sitter.QueryCursor(query).matches(tree.root_node):
        for node in captures.get(rule.capture, ()):
            start, end = _span(node, rule.action, to_str)
            indent = _line_indent(text, to_str(node.start_byte))
            fields = {name: (nodes[0].text or b"").decode("utf-8", "replace") for name, nodes in captures.items()}
            fields.update(indent=indent, body_indent=indent + unit)
            before, after = _expand(rule, fields, newline)
            yield Site(start, end, before, after, rule.max_tokens or recipe.max_tokens, rule.kind)


def _pattern_sites(text: str, rule: Rule, recipe: Recipe):
    unit = indent_unit(text)
    newline = "\r\n" if "\r\n" in text else "\n"
    start = text.find(rule.pattern)
    while start >= 0:
        end = start + len(rule.pattern)
        indent = _line_indent(text, start)
        before, after = _expand(rule, {"indent": indent, "body_indent": indent + unit}, newline)
        yield Site(start, end, before, after, rule.max_tokens or recipe.max_tokens, rule.kind)
        start = text.find(rule.pattern, end)


def find_sites(text: str, tree, recipe: Recipe, language: LanguageSpec) -> list[Site]:
    """Non-overlapping hole sites in text order; QueryProblem when a rule cannot run here."""
    to_str = _Offsets(text)
    found: list[Site] = []
    for rule in recipe.rules_for(language.name):
        if rule.pattern is not None:
            found += _pattern_sites(text, rule, recipe)
        else:
            found += _query_sites(text, tree, rule, recipe, language, to_str)
    kept: list[Site] = []
    for site in sorted(found, key=lambda s: (s.start, s.end)):
        if kept and (site.start < kept[-1].end or site.start == kept[-1].start):
            continue  # overlaps (or shares an insertion point with) an earlier site
        kept.append(site)
    return kept
