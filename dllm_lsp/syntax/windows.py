"""Prefix and suffix windows cut at whole statements and definitions.

A window never starts or ends in the middle of a statement when the tree
offers a boundary within the budget; otherwise it is cut at a line boundary
(and, for a single huge line, at the budget itself).
"""

from __future__ import annotations

import tree_sitter

from dllm_lsp.syntax.document_tree import byte_offset
from dllm_lsp.syntax.languages import LanguageSpec


def _first_statement_start(node: tree_sitter.Node, lower: int, cursor: int, blocks: frozenset[str]) -> int | None:
    """Smallest start byte in [lower, cursor) of a statement (a child of a block node).

    Children are visited in document order, so the first match is the smallest.
    """
    is_block = node.type in blocks
    for child in node.children:
        if child.end_byte <= lower:
            continue
        if child.start_byte >= cursor:
            break
        if is_block and child.start_byte >= lower and child.is_named:
            return child.start_byte
        found = _first_statement_start(child, lower, cursor, blocks)
        if found is not None:
            return found
    return None


def _last_statement_end(node: tree_sitter.Node, cursor: int, upper: int, blocks: frozenset[str]) -> int | None:
    """Largest end byte in (cursor, upper] of a statement; children visited last first."""
    is_block = node.type in blocks
    for child in reversed(node.children):
        if child.start_byte >= upper:
            continue
        if child.end_byte <= cursor:
            break
        if is_block and child.end_byte <= upper and child.is_named:
            return child.end_byte
        found = _last_statement_end(child, cursor, upper, blocks)
        if found is not None:
            return found
    return None


def _str_index(source: bytes, byte: int) -> int:
    return len(source[:byte].decode("utf-8", "surrogatepass"))


def _on_grid(offset: int, step: int) -> int:
    """`offset` rounded up to a multiple of `step` (never earlier: the window stays in budget)."""
    return -(-offset // step) * step


def prefix_start(
    text: str,
    offset: int,
    budget_chars: int,
    language: LanguageSpec | None = None,
    tree: tree_sitter.Tree | None = None,
) -> int:
    """Str index where the prefix window begins.

    The window's lower bound sits on a grid of a quarter of the budget (absolute document
    offsets), so as the user types, the window's start moves once every quarter budget typed
    instead of at each statement. Why: the engine's context cache is exact by token prefix in
    suffix-then-prefix order, so a moved start re-encodes the whole prefix (~580 tokens, 1-2 s
    on a 2-core CPU); typing 400 characters deep in argparse moved it 14 times, and the replay's
    single-line answers there went from p50 ~1 s to ~0.35 s with the grid (benchmarks/RESULTS.md,
    seventeenth session). The window is then between 3/4 of the budget and all of it.
    """
    lower = _on_grid(offset - budget_chars, max(1, budget_chars // 4))
    if lower <= 0:
        return 0
    if tree is not None and language is not None:
        source = text.encode("utf-8", "surrogatepass")
        found = _first_statement_start(
            tree.root_node, byte_offset(text, lower), byte_offset(text, offset), language.block_types
        )
        if found is not None:
            start = _str_index(source, found)
            line_start = text.rfind("\n", 0, start) + 1
            # Keep the statement's indentation with it, if it begins its line.
            if line_start >= lower and not text[line_start:start].strip():
                return line_start
            return start
    newline = text.find("\n", lower, offset)
    return newline + 1 if newline >= 0 else lower


def suffix_end(
    text: str,
    offset: int,
    budget_chars: int,
    language: LanguageSpec | None = None,
    tree: tree_sitter.Tree | None = None,
) -> int:
    """Str index where the suffix window ends."""
    upper = offset + budget_chars
    if upper >= len(text):
        return len(text)
    if tree is not None and language is not None:
        source = text.encode("utf-8", "surrogatepass")
        found = _last_statement_end(
            tree.root_node, byte_offset(text, offset), byte_offset(text, upper), language.block_types
        )
        if found is not None:
            end = _str_index(source, found)
            line_end = text.find("\n", end)
            # Keep the rest of the statement's last line (a trailing comment, a closer).
            if line_end >= 0 and line_end <= upper and not text[end:line_end].strip():
                return line_end
            return end
    newline = text.rfind("\n", offset, upper)
    return newline if newline >= 0 else upper
