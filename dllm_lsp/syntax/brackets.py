"""Bracket scanning that skips strings and comments, for output shaping."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from dllm_lsp.syntax.languages import LanguageSpec

OPENERS = "([{"
CLOSERS = ")]}"
MATCH = dict(zip(CLOSERS, OPENERS))


@lru_cache(maxsize=None)
def _token_pattern(line_comment: str, quotes: str, block_comments: bool, triple_quotes: bool) -> re.Pattern:
    """One regex for the tokens that matter: comments and strings (skipped), brackets."""
    skip = [re.escape(line_comment) + r"[^\n]*"]
    if block_comments:
        skip.append(r"/\*[\s\S]*?(?:\*/|\Z)")
    if triple_quotes:  # Python docstrings span lines
        skip += [r'"""[\s\S]*?(?:"""|\Z)', r"'''[\s\S]*?(?:'''|\Z)"]
    for q in quotes:
        if q == "`":  # template strings span lines
            skip.append(r"`(?:[^`\\]|\\[\s\S])*`")
        else:
            skip.append(q + r"(?:[^" + q + r"\\\n]|\\.)*" + q)
    # A string still open at the end (of the line or of the text).
    opened = "|".join(q + r"(?:[^" + q + r"\\\n]|\\.)*" if q != "`" else r"`[\s\S]*" for q in quotes)
    return re.compile(f"(?P<skip>{'|'.join(skip)})|(?P<open>{opened})|(?P<bracket>[()\\[\\]{{}}])")


def _lex(s: str, language: LanguageSpec | None) -> Iterator[tuple[int, str]]:
    """Brackets of ``s`` outside strings and comments; "\0open-string" if ``s`` ends inside a string."""
    # Rust lifetimes ('a) and generics make ' ambiguous there; Rust chars are rare in completions.
    quotes = "\"`" if language is not None and language.name == "rust" else "\"'`"
    pattern = _token_pattern(
        language.line_comment if language else "#",
        quotes,
        language is not None and language.indent_style == "braces",
        language is not None and language.name == "python",
    )
    for m in pattern.finditer(s):
        if m.lastgroup == "bracket":
            yield m.start(), m.group()
        elif m.lastgroup == "open" and m.end() == len(s):
            yield m.start(), "\0open-string"


def bracket_events(s: str, language: LanguageSpec | None) -> Iterator[tuple[int, str]]:
    """(index, bracket) for every bracket of ``s`` outside strings and comments.

    A lexer, not a parser: good enough on the short, possibly incomplete text
    a model produces, where a real parse would be mostly ERROR nodes.
    """
    for pos, ch in _lex(s, language):
        if ch != "\0open-string":
            yield pos, ch


def ends_in_open_string(line: str, language: LanguageSpec | None) -> bool:
    """Whether ``line`` (text before a cursor) ends inside a string it opened."""
    return any(ch == "\0open-string" for _, ch in _lex(line, language))


def unclosed_openers(s: str, language: LanguageSpec | None) -> list[str]:
    """Openers of ``s`` left open at its end, outermost first."""
    stack: list[str] = []
    for _, ch in bracket_events(s, language):
        if ch in OPENERS:
            stack.append(ch)
        elif stack and stack[-1] == MATCH[ch]:
            stack.pop()
    return stack


def closed_after(open_before: list[str], after: str, language: LanguageSpec | None, reaches_end: bool) -> list[bool]:
    """For each opener before the cursor, whether the text after the cursor closes it.

    Closers after the cursor close the innermost openers first; a closer of
    another kind means the innermost opener was never closed (`foo(` typed
    inside a block whose `}` follows). Openers the window ``after`` does not
    close count as closed unless it reaches the end of the document.
    """
    closed = [not reaches_end] * len(open_before)
    pending = list(range(len(open_before)))  # indices still open, innermost last
    local: list[str] = []
    for _, ch in bracket_events(after, language):
        if ch in OPENERS:
            local.append(ch)
        elif local:
            local.pop()
        else:
            while pending and open_before[pending[-1]] != MATCH[ch]:
                closed[pending.pop()] = False  # skipped: nothing after the cursor closes it
            if pending:
                closed[pending.pop()] = True
    return closed


def fit_brackets(
    completion: str,
    prefix: str,
    suffix: str,
    line_suffix: str,
    language: LanguageSpec | None,
    single_line: bool,
    suffix_reaches_end: bool = False,
) -> tuple[str, int]:
    """Cut at closers the document already has, or take them over; balance what is left open.

    ``prefix``/``suffix`` are the context windows (cut at statements, so
    their brackets pair up; ``suffix_reaches_end`` when nothing follows it),
    ``line_suffix`` the rest of the cursor's line.
    Returns (text, how many characters after the cursor it replaces).
    """
    open_before = unclosed_openers(prefix, language)
    closed = closed_after(open_before, suffix, language, suffix_reaches_end)
    stack: list[str] = []
    outer = 0  # closers that close openers from before the cursor
    for pos, ch in bracket_events(completion, language):
        if ch in OPENERS:
            stack.append(ch)
            continue
        if stack:
            if stack[-1] != MATCH[ch]:
                completion = completion[:pos]  # mismatched closer: the model lost track
                break
            stack.pop()
            continue
        outer += 1
        index = len(open_before) - outer  # the opener this closer pairs with
        if index < 0 or open_before[index] != MATCH[ch]:
            completion = completion[:pos]
            break
        if not closed[index]:
            continue  # the document never closes this one: the completion must
        # The document closes this opener already: take its closer over on the
        # cursor's line, otherwise stop before the duplicate.
        if "\n" not in completion[:pos] and line_suffix.strip():
            tail = completion[pos:].split("\n")[0]
            j = 0
            while j < min(len(tail), len(line_suffix)) and tail[j] == line_suffix[j]:
                j += 1
            if j and j >= len(line_suffix.rstrip()):
                return completion[:pos] + tail, len(line_suffix)
            if j:
                return completion[: pos + j], j
        completion = completion[:pos]
        break
    else:
        if stack:
            completion = _balance(completion, single_line, language)
    return completion, 0


def _balance(completion: str, single_line: bool, language: LanguageSpec | None) -> str:
    """Close what the completion opened: trim multi-line text to its last balanced line, else append closers."""
    if not single_line:
        lines = completion.split("\n")
        for i in range(len(lines) - 1, 0, -1):
            head = "\n".join(lines[:i])
            if not unclosed_openers(head, language) and head.strip():
                return head
    completion = completion.rstrip()
    # Positions of the openers left open, to mirror `{ x` as `x }`.
    open_at: list[int] = []
    for pos, ch in bracket_events(completion, language):
        if ch in OPENERS:
            open_at.append(pos)
        elif open_at:
            open_at.pop()
    for pos in reversed(open_at):
        opener = completion[pos]
        padded = opener == "{" and completion[pos + 1 : pos + 2] == " "
        completion += (" " if padded else "") + {"(": ")", "[": "]", "{": "}"}[opener]
    return completion
