"""One table of the languages the syntax layer understands.

Every per-language fact (grammar loader, node types, comment syntax) lives in a
row of ``LANGUAGES``; the rest of the syntax layer is generic over that table,
so adding a language is adding a row, not a new code path.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal
from urllib.parse import unquote, urlparse

import tree_sitter


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    language_ids: tuple[str, ...]  # LSP languageId values
    extensions: tuple[str, ...]  # with the leading dot, lower case
    grammar: str  # "module:function" returning the grammar capsule
    comment_types: frozenset[str]
    string_types: frozenset[str]
    block_types: frozenset[str]  # nodes whose children are statements / members
    definition_types: frozenset[str]  # functions, classes, types (cross-file snippets)
    import_types: frozenset[str]  # import / use / include statements
    indent_style: Literal["indent", "braces"]  # "indent": blocks are defined by indentation
    line_comment: str
    block_opener: str  # what ends a line that opens a block body (":" or "{")
    # What a comment or a docstring starts with: an empty block's suggestion may not begin with
    # one under the server's `emptyBody: "code"` (context.py opening_bans). Measured for Python
    # only (benchmarks/RESULTS.md, nineteenth session); empty for the other languages.
    prose_starts: tuple[str, ...] = ()
    # A line left of a block is outside it, so a multi-line fill may end before it (the engine's
    # Hole.stop_indent; infill.block_indent says where "left" is). True where blocks are
    # indentation; for braces where measured: at 100 empty JavaScript function bodies the same
    # shown text in all 100, passes 0.87-0.88x, p50 0.78-0.88x (benchmarks/RESULTS.md, twentieth
    # session). Not C/C++ (preprocessor lines, labels and access specifiers sit left of a body),
    # not yet Go, Rust, Java (not measured: no sources of theirs on the benchmark machine).
    dedent_ends_block: bool = False


_C_LIKE_STRINGS = frozenset({"string_literal", "char_literal", "system_lib_string"})

LANGUAGES: tuple[LanguageSpec, ...] = (
    LanguageSpec(
        name="python",
        language_ids=("python",),
        extensions=(".py", ".pyi", ".pyw"),
        grammar="tree_sitter_python:language",
        comment_types=frozenset({"comment"}),
        string_types=frozenset({"string", "string_content", "concatenated_string"}),
        block_types=frozenset({"module", "block"}),
        definition_types=frozenset({"function_definition", "class_definition", "decorated_definition"}),
        import_types=frozenset({"import_statement", "import_from_statement"}),
        indent_style="indent",
        dedent_ends_block=True,
        line_comment="#",
        block_opener=":",
        # A comment, a string (a docstring), a string with a prefix (r"...", b'...').
        prose_starts=("#", '"', "'", *(p + q for p in ("r", "R", "u", "U", "b", "B", "f", "F") for q in "\"'")),
    ),
    LanguageSpec(
        name="javascript",
        language_ids=("javascript", "javascriptreact"),
        extensions=(".js", ".mjs", ".cjs", ".jsx"),
        grammar="tree_sitter_javascript:language",
        comment_types=frozenset({"comment"}),
        string_types=frozenset({"string", "template_string", "regex"}),
        block_types=frozenset({"program", "statement_block", "class_body", "switch_body"}),
        definition_types=frozenset(
            {"function_declaration", "class_declaration", "lexical_declaration", "generator_function_declaration"}
        ),
        import_types=frozenset({"import_statement"}),
        indent_style="braces",
        dedent_ends_block=True,
        line_comment="//",
        block_opener="{",
    ),
    LanguageSpec(
        name="typescript",
        language_ids=("typescript",),
        extensions=(".ts", ".mts", ".cts"),
        grammar="tree_sitter_typescript:language_typescript",
        comment_types=frozenset({"comment"}),
        string_types=frozenset({"string", "template_string", "regex"}),
        block_types=frozenset({"program", "statement_block", "class_body", "switch_body", "interface_body", "enum_body"}),
        definition_types=frozenset(
            {
                "function_declaration",
                "class_declaration",
                "lexical_declaration",
                "interface_declaration",
                "type_alias_declaration",
                "enum_declaration",
            }
        ),
        import_types=frozenset({"import_statement"}),
        indent_style="braces",
        dedent_ends_block=True,
        line_comment="//",
        block_opener="{",
    ),
    LanguageSpec(
        name="tsx",
        language_ids=("typescriptreact",),
        extensions=(".tsx",),
        grammar="tree_sitter_typescript:language_tsx",
        comment_types=frozenset({"comment"}),
        string_types=frozenset({"string", "template_string", "regex"}),
        block_types=frozenset({"program", "statement_block", "class_body", "switch_body", "interface_body", "enum_body"}),
        definition_types=frozenset(
            {
                "function_declaration",
                "class_declaration",
                "lexical_declaration",
                "interface_declaration",
                "type_alias_declaration",
                "enum_declaration",
            }
        ),
        import_types=frozenset({"import_statement"}),
        indent_style="braces",
        dedent_ends_block=True,
        line_comment="//",
        block_opener="{",
    ),
    LanguageSpec(
        name="go",
        language_ids=("go",),
        extensions=(".go",),
        grammar="tree_sitter_go:language",
        comment_types=frozenset({"comment"}),
        string_types=frozenset({"interpreted_string_literal", "raw_string_literal", "rune_literal"}),
        block_types=frozenset({"source_file", "block", "statement_list", "field_declaration_list"}),
        definition_types=frozenset({"function_declaration", "method_declaration", "type_declaration"}),
        import_types=frozenset({"import_declaration"}),
        indent_style="braces",
        line_comment="//",
        block_opener="{",
    ),
    LanguageSpec(
        name="rust",
        language_ids=("rust",),
        extensions=(".rs",),
        grammar="tree_sitter_rust:language",
        comment_types=frozenset({"line_comment", "block_comment"}),
        string_types=frozenset({"string_literal", "raw_string_literal", "char_literal"}),
        block_types=frozenset({"source_file", "block", "declaration_list", "field_declaration_list"}),
        definition_types=frozenset(
            {"function_item", "struct_item", "enum_item", "trait_item", "impl_item", "type_item", "const_item"}
        ),
        import_types=frozenset({"use_declaration"}),
        indent_style="braces",
        line_comment="//",
        block_opener="{",
    ),
    LanguageSpec(
        name="c",
        language_ids=("c",),
        extensions=(".c", ".h"),
        grammar="tree_sitter_c:language",
        comment_types=frozenset({"comment"}),
        string_types=_C_LIKE_STRINGS,
        block_types=frozenset({"translation_unit", "compound_statement", "field_declaration_list"}),
        definition_types=frozenset({"function_definition", "struct_specifier", "type_definition", "declaration"}),
        import_types=frozenset({"preproc_include"}),
        indent_style="braces",
        line_comment="//",
        block_opener="{",
    ),
    LanguageSpec(
        name="cpp",
        language_ids=("cpp", "cuda-cpp"),
        extensions=(".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".cu"),
        grammar="tree_sitter_cpp:language",
        comment_types=frozenset({"comment"}),
        string_types=_C_LIKE_STRINGS | {"raw_string_literal"},
        block_types=frozenset(
            {"translation_unit", "compound_statement", "field_declaration_list", "declaration_list"}
        ),
        definition_types=frozenset(
            {"function_definition", "class_specifier", "struct_specifier", "type_definition", "declaration"}
        ),
        import_types=frozenset({"preproc_include"}),
        indent_style="braces",
        line_comment="//",
        block_opener="{",
    ),
    LanguageSpec(
        name="java",
        language_ids=("java",),
        extensions=(".java",),
        grammar="tree_sitter_java:language",
        comment_types=frozenset({"line_comment", "block_comment"}),
        string_types=frozenset({"string_literal", "character_literal", "text_block"}),
        block_types=frozenset(
            {"program", "block", "class_body", "interface_body", "enum_body", "switch_block", "constructor_body"}
        ),
        definition_types=frozenset(
            {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
             "method_declaration"}
        ),
        import_types=frozenset({"import_declaration"}),
        indent_style="braces",
        line_comment="//",
        block_opener="{",
    ),
)

_BY_ID = {lid: spec for spec in LANGUAGES for lid in (*spec.language_ids, spec.name)}
_BY_EXT = {ext: spec for spec in LANGUAGES for ext in spec.extensions}


def language_named(name: str) -> LanguageSpec | None:
    """The spec whose name or LSP languageId is ``name``."""
    return _BY_ID.get(name.lower()) if name else None


def _path_of(path_or_uri: str) -> str:
    if "://" in path_or_uri or path_or_uri.startswith("file:"):
        return unquote(urlparse(path_or_uri).path)
    return path_or_uri


def language_for(path_or_uri: str | None, language_id: str | None = None) -> LanguageSpec | None:
    """Resolve a language from the LSP languageId first, then the file extension.

    Returns None for anything unknown: callers fall back to line-based context.
    """
    if language_id:
        spec = language_named(language_id)
        if spec is not None:
            return spec
    if path_or_uri:
        ext = os.path.splitext(_path_of(path_or_uri))[1].lower()
        return _BY_EXT.get(ext)
    return None


@lru_cache(maxsize=None)
def grammar_for(spec: LanguageSpec) -> tree_sitter.Language:
    module_name, func_name = spec.grammar.split(":")
    module = importlib.import_module(module_name)
    return tree_sitter.Language(getattr(module, func_name)())


_local = threading.local()


def parser_for(spec: LanguageSpec) -> tree_sitter.Parser:
    """A cached parser per language and thread (a Parser must not be shared across threads)."""
    cache = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    parser = cache.get(spec.name)
    if parser is None:
        parser = cache[spec.name] = tree_sitter.Parser(grammar_for(spec))
    return parser


def parse(text: str, spec: LanguageSpec, old_tree: tree_sitter.Tree | None = None) -> tree_sitter.Tree:
    source = text.encode("utf-8", "surrogatepass")
    if old_tree is None:
        return parser_for(spec).parse(source)
    return parser_for(spec).parse(source, old_tree)
