"""Bracket scanning that skips strings and comments, for output shaping."""

from __future__ import annotations

from collections.abc import Iterator

from dllm_lsp.syntax.languages import LanguageSpec

OPENERS = "([{"
CLOSERS = ")]}"
MATCH = dict(zip(CLOSERS, OPENERS))


def bracket_events(s: str, language: LanguageSpec | None) -> Iterator[tuple[int, str]]:
    """(index, bracket) for every bracket of ``s`` outside strings and comments.

    A lexer, not a parser: good enough on the short, possibly incomplete text
    a model produces, where a real parse would be mostly ERROR nodes.
    """
    line_comment = language.line_comment if language else "#"
    # Rust lifetimes ('a) and generics make ' ambiguous there; Rust chars are rare in completions.
    quotes = "\"`" if language is not None and language.name == "rust" else "\"'`"
    block_comments = language is not None and language.indent_style == "braces"
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if s.startswith(line_comment, i):
            nl = s.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if block_comments and s.startswith("/*", i):
            end = s.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if ch in quotes:
            j = i + 1
            while j < n and s[j] != ch:
                if s[j] == "\\":
                    j += 1
                elif s[j] == "\n" and ch != "`":
                    break  # unterminated on this line: stop treating it as a string
                j += 1
            i = j + 1
            continue
        if ch in OPENERS or ch in CLOSERS:
            yield i, ch
        i += 1


def unclosed_openers(s: str, language: LanguageSpec | None) -> list[str]:
    """Openers of ``s`` left open at its end, outermost first."""
    stack: list[str] = []
    for _, ch in bracket_events(s, language):
        if ch in OPENERS:
            stack.append(ch)
        elif stack and stack[-1] == MATCH[ch]:
            stack.pop()
    return stack


def leading_closers(s: str, language: LanguageSpec | None) -> int:
    """How many closers of ``s`` close something opened before ``s``."""
    depth = 0
    count = 0
    for _, ch in bracket_events(s, language):
        if ch in OPENERS:
            depth += 1
        elif depth:
            depth -= 1
        else:
            count += 1
    return count
