"""Did an edit introduce syntax errors? Shared by shaping, range edits and the refactor command."""

from __future__ import annotations

import tree_sitter

from dllm_lsp.syntax.languages import LanguageSpec, parse


def error_count(tree: tree_sitter.Tree) -> int:
    """Number of ERROR and MISSING nodes in ``tree``."""
    root = tree.root_node
    if not root.has_error:
        return 0
    count = 0
    cursor = root.walk()
    while True:
        node = cursor.node
        if node.is_error or node.is_missing:
            count += 1
        # Only descend into subtrees that contain an error somewhere.
        if node.has_error and cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return count


def new_error_count(
    original: str,
    filled: str,
    language: LanguageSpec | None,
    original_tree: tree_sitter.Tree | None = None,
) -> int:
    """How many more ERROR/MISSING nodes ``filled`` has than ``original`` (never negative).

    Unknown languages cannot be checked and report 0.
    """
    if language is None:
        return 0
    before = error_count(original_tree if original_tree is not None else parse(original, language))
    after = error_count(parse(filled, language))
    return max(0, after - before)
