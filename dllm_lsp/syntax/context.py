"""What to ask the model for at a cursor: the kind of completion and its context windows.

Pure functions of (text, offset, language): no LSP types, no engine types.
Offsets are Python str indices (code points).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import tree_sitter

from dllm_lsp.syntax.brackets import CLOSERS, ends_in_open_string, unclosed_openers
from dllm_lsp.syntax.document_tree import byte_offset
from dllm_lsp.syntax.languages import LanguageSpec, parse
from dllm_lsp.syntax.snippets import cross_file_snippets
from dllm_lsp.syntax.text_lines import is_word, line_bounds, next_nonblank_line, previous_nonblank_line
from dllm_lsp.syntax.windows import prefix_start, suffix_end

Kind = Literal["none", "line", "multiline", "block"]
# Where an inline suggestion may span lines: "emptyBlock" only in a block that has no body yet
# (what Copilot and Sourcegraph Cody decide); "always" also on any blank line; "never" nowhere.
MultilinePolicy = Literal["emptyBlock", "always", "never"]
# What an empty block's suggestion may start with: "code" (not a comment or a docstring: the
# default model's invented ones never matched and took ~2x a code line's passes), or "any".
EmptyBodyPolicy = Literal["code", "any"]

# Token budget and first canvas length bucket per kind.
MAX_TOKENS: dict[str, int] = {"none": 0, "line": 24, "multiline": 64, "block": 128}
BUCKETS: dict[str, int | None] = {"none": None, "line": 16, "multiline": 32, "block": 64}


@dataclass(frozen=True)
class ContextBudget:
    prefix_tokens: int = 768
    suffix_tokens: int = 256
    chars_per_token: float = 3.2
    snippet_tokens: int = 0  # off unless asked: server/options.py says why
    snippet_time_s: float = 0.02  # wall-clock budget for cross-file snippets

    def chars(self, tokens: int) -> int:
        return int(tokens * self.chars_per_token)


@dataclass(frozen=True)
class CompletionContext:
    kind: Kind
    reason: str  # why this kind (e.g. "inside string", "mid-identifier")
    prefix: str  # window of text before the cursor
    suffix: str  # window of text after the cursor
    max_tokens: int  # from the kind: line 24, multiline 64, block 128
    bucket: int | None  # first canvas length bucket for the kind
    snippets: tuple[str, ...] = ()  # cross-file snippets (definitions of imported names)
    max_lines: int | None = None  # a multi-line suggestion's most lines (shaping's cap_lines)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _inside_brackets(before: str, language: LanguageSpec | None) -> bool:
    """Whether the line before the cursor leaves a bracket open that is not a block.

    `f(lambda x:`, `a[1:` and (in Python) `{"key":` end with a colon that opens no block.
    """
    non_block = "([{" if language is not None and language.indent_style == "indent" else "(["
    return any(o in non_block for o in unclosed_openers(before, language))


def _inside_string_or_comment(tree: tree_sitter.Tree, text: str, offset: int, language: LanguageSpec) -> str | None:
    """"inside string" / "inside comment" when the cursor is within one, else None."""
    b = byte_offset(text, offset)
    for probe in (b, b - 1):
        if probe < 0:
            continue
        node = tree.root_node.descendant_for_byte_range(probe, probe)
        while node is not None:
            if node.type in language.comment_types:
                # A line comment runs to the end of its line: its end is still inside.
                body = node.text or b""
                at_end_of_line_comment = b == node.end_byte and not body.endswith(b"*/")
                if node.start_byte < b < node.end_byte or at_end_of_line_comment:
                    return "inside comment"
            if node.type in language.string_types and node.start_byte < b < node.end_byte:
                return "inside string"
            node = node.parent
    return None


def _classify(
    text: str, offset: int, language: LanguageSpec | None, tree: tree_sitter.Tree | None
) -> tuple[Kind, str]:
    line_start, line_end = line_bounds(text, offset)
    if tree is not None and language is not None:
        inside = _inside_string_or_comment(tree, text, offset, language)
        if inside:
            return "none", inside
    # A string being typed has no closing quote yet, so the tree only shows an ERROR.
    # (Not for unknown languages: in prose an apostrophe is no quote.)
    if tree is not None and tree.root_node.has_error and ends_in_open_string(text[line_start:offset], language):
        return "none", "inside string"
    if offset < len(text) and is_word(text[offset]):
        if offset > 0 and is_word(text[offset - 1]):
            return "none", "mid-identifier"
        return "none", "before identifier"
    before, after = text[line_start:offset], text[offset:line_end].strip()
    opener = language.block_opener if language else None
    only_closers = all(ch in CLOSERS + ";," for ch in after)
    if before.strip():
        ends = before.rstrip()
        opens_block = ends.endswith(opener) if opener else ends.endswith((":", "{"))
        if opens_block and only_closers and not _inside_brackets(before, language):
            return "block", "after block opener"
        return "line", "rest of line" if not after else "middle of line"
    if after and not only_closers:
        return "line", "before code on line"
    # Blank line: a block body if the previous line opens a block that is still empty.
    prev = previous_nonblank_line(text, line_start)
    nxt = next_nonblank_line(text, line_end)
    prev_code = prev.rstrip()
    opens = prev_code.endswith(opener) if opener else prev_code.endswith((":", "{"))
    if opens:
        body_empty = nxt is None or _indent(nxt) <= _indent(prev) or (after and only_closers)
        if body_empty:
            return "block", "empty block body"
        return "multiline", "start of block"
    return "multiline", "blank line"


def under_policy(ctx: CompletionContext, multiline: MultilinePolicy, max_lines: int | None = None) -> CompletionContext:
    """`ctx` as a single line where the policy allows no multi-line suggestion there. A blank
    line inside code that goes on below it gets the next statement, not a guess at the rest of
    the block: that guess is what the user is about to type anyway, costs several times a
    line's latency (up to 64 tokens) and is wrong more often the longer it runs. A multi-line
    suggestion shows at most `max_lines` lines (None: as many as its tokens make)."""
    narrow = (ctx.kind == "multiline" and multiline != "always") or (ctx.kind == "block" and multiline == "never")
    if not narrow:
        multi = ctx.kind in ("multiline", "block")
        return dataclasses.replace(ctx, max_lines=max_lines) if multi and max_lines else ctx
    return dataclasses.replace(ctx, kind="line", max_tokens=MAX_TOKENS["line"], bucket=BUCKETS["line"])


def opening_bans(ctx: CompletionContext, language: LanguageSpec | None, empty_body: EmptyBodyPolicy) -> tuple[str, ...]:
    """What the fill may not start with (the engine's Hole.banned_starts): at an empty block's
    body under "code", its language's comment and docstring starts; else nothing."""
    at_empty_body = ctx.reason in ("empty block body", "after block opener")
    if empty_body != "code" or not at_empty_body or language is None:
        return ()
    return language.prose_starts


def _make(kind: Kind, reason: str, prefix: str, suffix: str, snippets=()) -> CompletionContext:
    return CompletionContext(kind, reason, prefix, suffix, MAX_TOKENS[kind], BUCKETS[kind], tuple(snippets))


def completion_context(
    text: str,
    offset: int,
    language: LanguageSpec | None,
    budget: ContextBudget = ContextBudget(),
    tree: tree_sitter.Tree | None = None,
    open_documents: Mapping[str, str] = {},
) -> CompletionContext:
    """Decide the completion kind at ``offset`` and cut the context windows.

    ``tree`` must match ``text`` if given (it is parsed otherwise). Unknown
    languages (``language=None``) get line-based windows and text heuristics.
    """
    tree = _tree_at(text, offset, language, tree)
    kind, reason = _classify(text, offset, language, tree)
    if kind == "none":
        return _make(kind, reason, "", "")
    return _make(kind, reason, *_windows(text, offset, language, budget, tree, open_documents))


def resting_context(
    text: str,
    offset: int,
    language: LanguageSpec | None,
    budget: ContextBudget = ContextBudget(),
    tree: tree_sitter.Tree | None = None,
    open_documents: Mapping[str, str] = {},
) -> CompletionContext:
    """The windows a completion at ``offset`` would carry, whatever kind fits there now: the
    cursor rests at ``offset`` and the user has not typed yet (a place with text after it on
    its line gets a completion once the user types). Its kind is "line"; only its windows count."""
    tree = _tree_at(text, offset, language, tree)
    return _make("line", "the cursor rests here", *_windows(text, offset, language, budget, tree, open_documents))


def _tree_at(text: str, offset: int, language: LanguageSpec | None,
             tree: tree_sitter.Tree | None) -> tree_sitter.Tree | None:
    """The document's tree (parsed if not given), once ``offset`` is checked to lie in ``text``."""
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} outside the document (length {len(text)})")
    if tree is None and language is not None:
        tree = parse(text, language)
    return tree


def _windows(text: str, offset: int, language: LanguageSpec | None, budget: ContextBudget,
             tree: tree_sitter.Tree | None, open_documents: Mapping[str, str]) -> tuple[str, str, tuple[str, ...]]:
    snippets: tuple[str, ...] = ()
    if open_documents and language is not None and budget.snippet_tokens > 0:
        snippets = cross_file_snippets(
            text, language, tree, open_documents, budget.chars(budget.snippet_tokens), budget.snippet_time_s
        )
    # The snippets go before the prefix (with_snippets), so they take their room out of the
    # prefix's window: the engine keeps the end of what it is sent within its own budget and
    # cuts the start, and a full window plus snippets lost the snippets there (in 74 of 152
    # completions in this repository's code: benchmarks/bench_cross_file.py).
    room = budget.chars(budget.prefix_tokens) - snippets_chars(snippets, language)
    start = prefix_start(text, offset, max(0, room), language, tree)
    end = suffix_end(text, offset, budget.chars(budget.suffix_tokens), language, tree)
    return text[start:offset], text[offset:end], snippets


def _bucket_for(tokens: int) -> int:
    bucket = 16
    while bucket < tokens:
        bucket *= 2
    return bucket


def range_context(
    text: str,
    start: int,
    end: int,
    language: LanguageSpec | None,
    budget: ContextBudget = ContextBudget(),
    tree: tree_sitter.Tree | None = None,
) -> CompletionContext:
    """Context for re-masking ``text[start:end]``: prefix before ``start``, suffix after ``end``.

    The kind is "line" for a span within one line, "block" for a whole block
    body, else "multiline"; ``max_tokens`` and ``bucket`` grow with the span.
    """
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"range {start}..{end} outside the document (length {len(text)})")
    if tree is None and language is not None:
        tree = parse(text, language)
    selected = text[start:end]
    kind: Kind = "multiline" if "\n" in selected.strip("\n") else "line"
    # The whole body of a block (`pass`, `todo!()`, `...` placeholders included) is a block fill.
    head = text[:start].rstrip()
    tail = text[end:].lstrip(" \t")
    openers = (language.block_opener,) if language else (":", "{")
    if head.endswith(openers) and (not tail or tail[0] in "\r\n" + CLOSERS):
        kind = "block"
    span_tokens = math.ceil(len(selected) / budget.chars_per_token)
    max_tokens = max(MAX_TOKENS[kind], math.ceil(span_tokens * 1.5) + 8)
    cut_start = prefix_start(text, start, budget.chars(budget.prefix_tokens), language, tree)
    cut_end = suffix_end(text, end, budget.chars(budget.suffix_tokens), language, tree)
    return CompletionContext(
        kind,
        "regenerate selection",
        text[cut_start:start],
        text[end:cut_end],
        max_tokens,
        _bucket_for(math.ceil(span_tokens * 1.25)),
    )


def with_snippets(ctx: CompletionContext, language: LanguageSpec | None) -> str:
    """The prefix with the cross-file snippets prepended as comments."""
    return _as_comments(ctx.snippets, language) + ctx.prefix


def snippets_chars(snippets: tuple[str, ...], language: LanguageSpec | None) -> int:
    """What the snippets add in front of the prefix, in characters."""
    return len(_as_comments(snippets, language))


def _as_comments(snippets: tuple[str, ...], language: LanguageSpec | None) -> str:
    if not snippets:
        return ""
    mark = language.line_comment if language else "#"
    lines = [f"{mark} {line}".rstrip() for snippet in snippets for line in snippet.split("\n")]
    return "\n".join(lines) + "\n"
