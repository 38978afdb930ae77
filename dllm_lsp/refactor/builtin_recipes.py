"""The built-in recipes, written in the same schema as user TOML recipes.

Queries are generated per language from small tables (function node types,
placeholder statements) rather than copy-pasted per language.
"""

from __future__ import annotations

from dllm_lsp.refactor.recipes import Recipe, RecipeError, recipe_from_dict
from dllm_lsp.syntax.languages import LANGUAGES

DEFAULT_MARKER = "<FILL>"
COMMENT_MARKER = r"dllm: ?fill"  # `# dllm: fill`, `// dllm: fill`
# No \b here: a query string literal does not pass backslash escapes through to the regex.
_TODO = r"(?i)(todo|fixme)"
_NOT_IMPLEMENTED = r"(?i)(not.?implemented|todo|unimplemented)"

# Function-like nodes and their body node type, per language family.
_JS_FUNCTIONS = ("function_declaration", "function_expression", "arrow_function", "method_definition",
                 "generator_function_declaration", "generator_function")
_BRACE_FUNCTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "javascript": (_JS_FUNCTIONS, "statement_block"),
    "typescript": (_JS_FUNCTIONS, "statement_block"),
    "tsx": (_JS_FUNCTIONS, "statement_block"),
    "go": (("function_declaration", "method_declaration", "func_literal"), "block"),
    "rust": (("function_item",), "block"),
    "c": (("function_definition",), "compound_statement"),
    "cpp": (("function_definition",), "compound_statement"),
    "java": (("method_declaration",), "block"),
}
_COMMENT = {spec.name: sorted(spec.comment_types) for spec in LANGUAGES}

_BRACE_BODY = "\n${body_indent}${hole}\n${indent}"  # what an empty `{}` body becomes


def _alt(types) -> str:
    return "[" + " ".join(f"({t})" for t in types) + "]"


def _each(node_types, fields: str, predicates: str = "") -> str:
    """One pattern per node type: a field constraint cannot follow an alternation."""
    return "\n".join(f"(({t} {fields}){predicates})" for t in node_types)


def _todo_comment_bodies() -> list[dict]:
    """`{ // TODO }` bodies (only a TODO comment inside): fill after the comment."""
    rules = []
    for lang, (functions, body) in _BRACE_FUNCTIONS.items():
        comment = _alt(_COMMENT[lang])
        rules.append({
            "languages": [lang],
            "query": _each(functions, f"body: ({body} . {comment} @_c .) @hole", f' (#match? @_c "{_TODO}")'),
            "action": "inner",
            "template": _BRACE_BODY,
            "kind": "multiline",
        })
    return rules


def _placeholder_statements() -> list[dict]:
    """Bodies whose only statement is a placeholder: `todo!()`, `panic("TODO")`, `throw new Error(...)`."""
    not_implemented = f' (#match? @hole "{_NOT_IMPLEMENTED}")'
    rust_macro = "(macro_invocation macro: (identifier) @_m)"
    rust_names = ' (#any-of? @_m "todo" "unimplemented")'
    go_panic = "(expression_statement (call_expression function: (identifier) @_f)) @hole"
    return [
        {"languages": ["javascript", "typescript", "tsx"], "kind": "multiline",
         "query": _each(_JS_FUNCTIONS, "body: (statement_block . (throw_statement) @hole .)", not_implemented)},
        {"languages": ["rust"], "kind": "multiline", "query": "\n".join([
            _each(["function_item"], f"body: (block . {rust_macro} @hole .)", rust_names),
            _each(["function_item"], f"body: (block . (expression_statement {rust_macro}) @hole .)", rust_names),
        ])},
        {"languages": ["go"], "kind": "multiline", "query": _each(_BRACE_FUNCTIONS["go"][0], f"body: (block (statement_list . {go_panic} .))",
                                             f' (#eq? @_f "panic"){not_implemented}')},
        {"languages": ["java"], "kind": "multiline", "query": _each(_BRACE_FUNCTIONS["java"][0], "body: (block . (throw_statement) @hole .)",
                                               not_implemented)},
    ]


def _python_placeholders() -> dict:
    """`pass`, `...`, `raise NotImplementedError` as the whole body (after an optional docstring)."""
    docstring = "(expression_statement (string)) ."
    patterns = []
    for head in ("", docstring):
        patterns += [
            f"(function_definition body: (block . {head} [(pass_statement) (expression_statement (ellipsis))] @hole .))",
            f'(function_definition body: (block . {head} (raise_statement) @hole .) '
            f'(#match? @hole "^raise\\\\s+NotImplementedError"))',
        ]
    return {"languages": ["python"], "query": "\n".join(patterns), "kind": "multiline"}


def _fill_markers(marker: str) -> list[dict]:
    rules = [{"languages": "*", "pattern": marker, "max_tokens": 64}]
    for lang, types in _COMMENT.items():
        rules.append({"languages": [lang], "query": f'({_alt(types)} @hole (#match? @hole "{COMMENT_MARKER}"))'})
    return rules


_PY_STRING_START = "^[rbuRBUfF]*(\\\"|')"


def _builtin_tables(marker: str) -> dict[str, dict]:
    return {
        "fill-bodies": {
            "name": "fill-bodies",
            "description": "fill placeholder bodies: pass, ..., raise NotImplementedError, todo!(), "
                           "panic(\"TODO\"), throw new Error(\"not implemented\"), { // TODO }",
            "max_tokens": 64,
            "rule": [_python_placeholders(), *_placeholder_statements(), *_todo_comment_bodies()],
        },
        "fill-markers": {
            "name": "fill-markers",
            "description": f"fill every {marker} marker and every `dllm: fill` comment",
            "max_tokens": 64,
            "rule": _fill_markers(marker),
        },
        "add-return-types": {
            "name": "add-return-types",
            "description": "Python: add a return annotation to functions without one",
            "max_tokens": 8,
            "rule": [{"languages": ["python"], "action": "after", "template": " -> ${hole}", "kind": "line",
                      "query": "(function_definition parameters: (parameters) @hole !return_type)"}],
        },
        "add-type-hints": {
            "name": "add-type-hints",
            "description": "Python: annotate parameters without a type (self and cls excepted)",
            "max_tokens": 8,
            "rule": [
                {"languages": ["python"], "action": "after", "template": ": ${hole}", "kind": "line",
                 "query": '(function_definition parameters: (parameters (identifier) @hole '
                          '(#not-match? @hole "^(self|cls)$")))'},
                {"languages": ["python"], "template": "${name}: ${hole} = ${value}", "kind": "line",
                 "query": "(function_definition parameters: (parameters "
                          "(default_parameter name: (identifier) @name value: (_) @value) @hole))"},
            ],
        },
        "add-docstrings": {
            "name": "add-docstrings",
            "description": "Python: add a one-line docstring to functions and classes without one",
            "max_tokens": 24,
            "rule": [{"languages": ["python"], "action": "before", "template": '"""${hole}"""\n${indent}', "kind": "line",
                      "query": _each(["function_definition", "class_definition"], "body: (block . (_) @hole)",
                                     f' (#not-match? @hole "{_PY_STRING_START}")')}],
        },
    }


BUILTIN_NAMES = ("fill-bodies", "fill-markers", "add-return-types", "add-type-hints", "add-docstrings", "regenerate")


def builtin_recipe(name: str, marker: str = DEFAULT_MARKER) -> Recipe:
    tables = _builtin_tables(marker)
    if name not in tables:
        raise RecipeError(f"unknown recipe {name!r} (built-in: {', '.join(BUILTIN_NAMES)}; or --recipe-file FILE)")
    return recipe_from_dict(tables[name], f"built-in recipe {name}")


def regenerate_recipe(query: str, capture: str = "hole", languages: list[str] | None = None,
                      max_tokens: int = 64) -> Recipe:
    """`regenerate`: re-mask every match of the user's query."""
    rule = {"languages": languages or "*", "query": query, "capture": capture}
    return recipe_from_dict({"name": "regenerate", "description": "re-mask every match of --query",
                             "max_tokens": max_tokens, "rule": [rule]}, "--query")
