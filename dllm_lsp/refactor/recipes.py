"""Recipes: which spans of a file become holes, as tree-sitter queries per language.

A recipe is a list of rules; a rule names its languages, a query (or a
literal text `pattern`), the capture that marks the span, what to do with it
(`action`) and a `template` for the text around the hole. Built-in recipes
(builtin_recipes.py) and user TOML recipes go through the same validation
(`recipe_from_dict`), so both fail the same way on the same mistakes.

Actions, for a captured node N:
- ``replace``: the hole replaces N (a placeholder statement, a marker comment);
- ``inner``: the hole replaces the inside of N's brackets, after any comments
  there (an empty ``{}`` body or one with only a TODO comment);
- ``before`` / ``after``: the hole is inserted at N's start / end.

The template surrounds the hole: ``${hole}`` is where the model writes,
``${indent}`` is the indentation of N's line, ``${body_indent}`` one level
deeper, and ``${NAME}`` is the text of capture ``@NAME``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from dllm_lsp.syntax.languages import LANGUAGES, language_named

ACTIONS = ("replace", "inner", "before", "after")
TEMPLATE_BUILTINS = frozenset({"hole", "indent", "body_indent"})
MAX_TOKENS_LIMIT = 1024  # the engine's per-hole limit (protocol.Hole.validate)


class RecipeError(ValueError):
    """A recipe that cannot be used as written; the message says where and why."""


@dataclass(frozen=True)
class Rule:
    languages: tuple[str, ...]  # language names from the syntax layer's table
    query: str | None = None  # tree-sitter query capturing `capture`
    pattern: str | None = None  # or a literal marker text (found anywhere in the file)
    capture: str = "hole"
    action: str = "replace"
    template: str = "${hole}"
    max_tokens: int | None = None  # None: the recipe's
    kind: str | None = None  # completion kind for shaping ("line", "multiline", "block"); None: from the context

    def template_parts(self) -> tuple[str, str]:
        """The template split around ``${hole}`` (other fields still unexpanded)."""
        before, _, after = self.template.partition("${hole}")
        return before, after


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    rules: tuple[Rule, ...]
    max_tokens: int = 64
    source: str = "built-in"  # where it came from, for messages
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def rules_for(self, language: str) -> tuple[Rule, ...]:
        return tuple(rule for rule in self.rules if language in rule.languages)

    @property
    def languages(self) -> frozenset[str]:
        return frozenset(lang for rule in self.rules for lang in rule.languages)


_RULE_KEYS = {"languages", "query", "pattern", "capture", "action", "template", "max_tokens", "kind"}
KINDS = ("line", "multiline", "block")
_RECIPE_KEYS = {"name", "description", "max_tokens", "rule"}


def _check_max_tokens(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_TOKENS_LIMIT:
        raise RecipeError(f"{where}: max_tokens must be an integer in [1, {MAX_TOKENS_LIMIT}], got {value!r}")
    return value


def _check_languages(value: Any, where: str) -> tuple[str, ...]:
    if value == "*":
        return tuple(spec.name for spec in LANGUAGES)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise RecipeError(f"{where}: languages must be a non-empty list of language names (or \"*\")")
    names = []
    for v in value:
        spec = language_named(v)
        if spec is None:
            known = ", ".join(s.name for s in LANGUAGES)
            raise RecipeError(f"{where}: unknown language {v!r} (known: {known})")
        names.append(spec.name)
    return tuple(dict.fromkeys(names))


def _check_template(template: Any, where: str) -> str:
    if not isinstance(template, str):
        raise RecipeError(f"{where}: template must be a string")
    t = Template(template)
    if not t.is_valid():
        raise RecipeError(f"{where}: template {template!r} has a bad $-placeholder (write $$ for a literal $)")
    names = t.get_identifiers()
    if template.count("${hole}") != 1 or names.count("hole") != 1:
        raise RecipeError(f"{where}: template must contain ${{hole}} exactly once (as ${{hole}}), got {template!r}")
    return template


def rule_from_dict(data: Any, where: str, default_languages: Any = None) -> Rule:
    if not isinstance(data, dict):
        raise RecipeError(f"{where}: a rule must be a table")
    unknown = set(data) - _RULE_KEYS
    if unknown:
        raise RecipeError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_RULE_KEYS)})")
    query, pattern = data.get("query"), data.get("pattern")
    if (query is None) == (pattern is None):
        raise RecipeError(f"{where}: give exactly one of `query` (tree-sitter) or `pattern` (literal text)")
    for key, value in (("query", query), ("pattern", pattern)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise RecipeError(f"{where}: {key} must be a non-empty string")
    capture = data.get("capture", "hole")
    if not isinstance(capture, str) or not capture.replace("_", "").replace(".", "").isalnum():
        raise RecipeError(f"{where}: capture must be a capture name like \"hole\", got {capture!r}")
    if query is not None and f"@{capture}" not in query:
        raise RecipeError(f"{where}: the query never captures @{capture}")
    action = data.get("action", "replace")
    if action not in ACTIONS:
        raise RecipeError(f"{where}: action must be one of {ACTIONS}, got {action!r}")
    if pattern is not None and action != "replace":
        raise RecipeError(f"{where}: a `pattern` rule can only `replace` the marker")
    template = _check_template(data.get("template", "${hole}"), where)
    if pattern is not None and set(Template(template).get_identifiers()) - TEMPLATE_BUILTINS:
        raise RecipeError(f"{where}: a `pattern` rule has no captures; its template may use only "
                          "${hole}, ${indent} and ${body_indent}")
    languages = data.get("languages", default_languages)
    if languages is None:
        raise RecipeError(f"{where}: missing `languages`")
    max_tokens = data.get("max_tokens")
    kind = data.get("kind")
    if kind is not None and kind not in KINDS:
        raise RecipeError(f"{where}: kind must be one of {KINDS}, got {kind!r}")
    return Rule(
        kind=kind,
        languages=_check_languages(languages, where),
        query=query,
        pattern=pattern,
        capture=capture,
        action=action,
        template=template,
        max_tokens=None if max_tokens is None else _check_max_tokens(max_tokens, where),
    )


def recipe_from_dict(data: Any, source: str) -> Recipe:
    """Validate a recipe table (parsed TOML or a built-in dict)."""
    if not isinstance(data, dict):
        raise RecipeError(f"{source}: a recipe must be a table")
    unknown = set(data) - _RECIPE_KEYS
    if unknown:
        raise RecipeError(f"{source}: unknown keys {sorted(unknown)} (allowed: {sorted(_RECIPE_KEYS)})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RecipeError(f"{source}: missing `name`")
    rules_raw = data.get("rule")
    if not isinstance(rules_raw, list) or not rules_raw:
        raise RecipeError(f"{source}: a recipe needs at least one [[rule]]")
    rules = tuple(rule_from_dict(r, f"{source}: rule {i + 1}") for i, r in enumerate(rules_raw))
    description = data.get("description", "")
    if not isinstance(description, str):
        raise RecipeError(f"{source}: description must be a string")
    return Recipe(
        name=name,
        description=description,
        rules=rules,
        max_tokens=_check_max_tokens(data.get("max_tokens", 64), source),
        source=source,
    )


def load_recipe_file(path: str | Path) -> Recipe:
    """A user recipe from TOML; RecipeError on unreadable files, bad TOML or a bad schema."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"{path}: cannot read recipe: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}") from None
    return recipe_from_dict(data, str(path))
