"""Turn a raw model completion into an edit worth showing, or drop it.

Each step is a small function over the completion string; ``shape_completion``
runs them in order and finishes with a parse check on the filled document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter

from dllm_lsp.syntax.brackets import CLOSERS, MATCH, OPENERS, bracket_events, leading_closers, unclosed_openers
from dllm_lsp.syntax.context import CompletionContext
from dllm_lsp.syntax.indentation import align_first_line, convert_indentation, indent_unit, leading
from dllm_lsp.syntax.languages import LanguageSpec, parse
from dllm_lsp.syntax.parse_check import error_count

_MAX_PARSE_TRIES = 6  # parse checks per completion: each is a full parse


@dataclass(frozen=True)
class ShapedCompletion:
    text: str  # insert at offset ...
    replace_end: int  # ... replacing text[offset:replace_end] (closers already there)


@dataclass(frozen=True)
class _Cursor:
    """What the steps need to know about the cursor's surroundings."""

    line_prefix: str  # text of the cursor's line before the cursor
    line_suffix: str  # text of the cursor's line after the cursor (no line ending)
    prev_line: str  # previous non-blank line
    expected_indent: str | None  # where a first line on a blank line belongs


def _cursor(text: str, offset: int, ctx: CompletionContext, unit: str) -> _Cursor:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end
    prev = next((ln for ln in reversed(text[:start].split("\n")) if ln.strip()), "")
    line_prefix = text[start:offset]
    expected = None
    if not line_prefix.strip():
        if ctx.kind == "block":
            # Indentation the user already typed past the opener line wins over our guess.
            typed = len(line_prefix) > len(leading(prev))
            expected = line_prefix if typed else leading(prev) + unit
        elif line_prefix:
            expected = line_prefix
    return _Cursor(line_prefix, text[offset:end].rstrip("\r"), prev, expected)


# -- repetition ---------------------------------------------------------------

_REPEATED_RUN = re.compile(r"(.{4,}?)\1{2,}")


def _trivial(lines: list[str]) -> bool:
    content = "".join(ln.strip() for ln in lines)
    return len(content) < 4 or all(ch in CLOSERS + ";," for ch in content)


def drop_repetition(completion: str, cur: _Cursor) -> str | None:
    """Cut loops (a line or group of lines repeated, a phrase repeated in a line); drop echoes."""
    lines = completion.split("\n")
    for i in range(len(lines)):
        for k in range(1, 5):
            unit = lines[i : i + k]
            repeats = 3 if k == 1 else 2
            if len(unit) == k and not _trivial(unit) and all(
                lines[i + r * k : i + (r + 1) * k] == unit for r in range(1, repeats)
            ):
                lines = lines[: i + k]
                break
    out = []
    for line in lines:
        m = _REPEATED_RUN.search(line)
        if m and len(set(m.group(1))) > 1 and len(m.group(1).strip()) >= 3:
            out.append(line[: m.start() + len(m.group(1))])
            break
        out.append(line)
    first = (cur.line_prefix + out[0]).strip() if out else ""
    if len(first) >= 8 and first == cur.prev_line.strip():
        return None  # the model echoed the line above
    return "\n".join(out)


# -- end of block (indentation) -------------------------------------------------


def stop_at_dedent(completion: str, cur: _Cursor) -> str:
    """Cut before the first later line indented less than the completion's first line."""
    lines = completion.split("\n")
    if len(lines) < 2:
        return completion
    base = cur.line_prefix + leading(lines[0]) if not cur.line_prefix.strip() else leading(cur.line_prefix)
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() and len(leading(line)) < len(base):
            return "\n".join(lines[:i]).rstrip()
    return completion


# -- brackets -----------------------------------------------------------------


def fit_brackets(
    completion: str, cur: _Cursor, ctx: CompletionContext, language: LanguageSpec | None, single_line: bool
) -> tuple[str, int]:
    """Cut at closers the document already has, or take them over; balance what is left open.

    Returns (text, how many characters after the cursor it replaces).
    """
    open_before = unclosed_openers(ctx.prefix, language)
    deficit = max(0, len(open_before) - leading_closers(ctx.suffix, language))
    stack: list[str] = []
    outer = 0  # closers that close openers from before the cursor
    balanced_line_end = 0  # end of the last completion line where stack was empty
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
        expected = open_before[-outer] if outer <= len(open_before) else None
        if expected != MATCH[ch]:
            completion = completion[:pos]
            break
        if outer <= deficit:
            continue  # the document never closes this one: the completion must
        # The document closes this opener already: take its closer over on the
        # cursor's line, otherwise stop before the duplicate.
        if "\n" not in completion[:pos] and cur.line_suffix.strip():
            tail = completion[pos:].split("\n")[0]
            j = 0
            while j < min(len(tail), len(cur.line_suffix)) and tail[j] == cur.line_suffix[j]:
                j += 1
            if j and j >= len(cur.line_suffix.rstrip()):
                return tail_join(completion, pos, tail), len(cur.line_suffix)
            if j:
                return completion[: pos + j], j
        completion = completion[:pos]
        break
    else:
        if stack:
            completion = _balance(completion, stack, single_line, language)
    return completion, 0


def tail_join(completion: str, pos: int, tail: str) -> str:
    return completion[:pos] + tail


def _balance(completion: str, stack: list[str], single_line: bool, language: LanguageSpec | None) -> str:
    """Close what the completion opened: trim multi-line text to its last balanced line, else append closers."""
    if not single_line:
        lines = completion.split("\n")
        for i in range(len(lines) - 1, 0, -1):
            head = "\n".join(lines[:i])
            if not unclosed_openers(head, language) and head.strip():
                return head
    closers = "".join({"(": ")", "[": "]", "{": "}"}[o] for o in reversed(stack))
    return completion.rstrip() + closers


# -- duplicates of the suffix ---------------------------------------------------


def drop_suffix_duplicate(completion: str, after: str) -> str | None:
    """None if the completion only repeats what follows; trim a tail that the suffix repeats."""
    body = completion.strip()
    if not body:
        return None
    if after.lstrip().startswith(body):
        return None
    after_lines = [ln.strip() for ln in after.split("\n") if ln.strip()][:8]
    lines = completion.split("\n")
    content = [i for i, ln in enumerate(lines) if ln.strip()]
    for m in range(min(len(content) - 1, len(after_lines)), 0, -1):
        tail = [lines[i].strip() for i in content[-m:]]
        if tail == after_lines[:m] and not _trivial(tail):
            return "\n".join(lines[: content[-m]]).rstrip()
    first_after = after.split("\n")[0].strip()
    if "\n" not in body and len(first_after) >= 2 and body.endswith(first_after) and body != first_after:
        return completion.rstrip()[: -len(first_after)].rstrip()
    return completion


# -- the pipeline ---------------------------------------------------------------


def _parse_ok(text: str, offset: int, candidate: str, end: int, language, base_errors: int) -> bool:
    filled = text[:offset] + candidate + text[end:]
    return error_count(parse(filled, language)) <= base_errors


def _trims(candidate: str):
    """Shorter versions to try when the full text adds parse errors: drop trailing lines."""
    lines = candidate.split("\n")
    for i in range(len(lines) - 1, 0, -1):
        head = "\n".join(lines[:i]).rstrip()
        if head.strip():
            yield head


def shape_completion(
    text: str,
    offset: int,
    completion: str,
    ctx: CompletionContext,
    language: LanguageSpec | None,
    tree: tree_sitter.Tree | None = None,
) -> ShapedCompletion | None:
    """Shape ``completion`` for insertion at ``offset``; None means drop it.

    For a range edit, pass the document with the range removed and ``offset``
    at its start.
    """
    if ctx.kind == "none" or not 0 <= offset <= len(text):
        return None
    crlf = "\r\n" in text
    comp = completion.replace("\r\n", "\n")
    unit = indent_unit(text)
    cur = _cursor(text, offset, ctx, unit)
    single_line = ctx.kind == "line"
    if single_line:
        comp = comp.split("\n")[0]
    comp = drop_repetition(comp, cur)
    if comp is None:
        return None
    comp = convert_indentation(comp, unit)
    comp = align_first_line(comp, cur.line_prefix, cur.expected_indent)
    if not single_line and (language is None or language.indent_style == "indent"):
        comp = stop_at_dedent(comp, cur)
    comp, replaced = fit_brackets(comp, cur, ctx, language, single_line)
    comp = comp.rstrip()
    if not replaced:
        comp = drop_suffix_duplicate(comp, text[offset:])
        if comp is None:
            return None
    if not comp.strip():
        return None
    end = offset + replaced
    if language is not None:
        base = error_count(tree if tree is not None else parse(text, language))
        tries = 0
        for candidate in (comp, *_trims(comp)):
            if tries >= _MAX_PARSE_TRIES:
                return None
            tries += 1
            if _parse_ok(text, offset, candidate, end, language, base):
                comp = candidate
                break
        else:
            return None
    if crlf:
        comp = comp.replace("\n", "\r\n")
    return ShapedCompletion(comp, end)
