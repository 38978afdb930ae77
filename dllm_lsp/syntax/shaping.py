"""Turn a raw model completion into an edit worth showing, or drop it.

``shape_completion`` runs the steps in order: single-line cut, repetition,
indentation (document style, first line, step width), end of block by
dedent, brackets (closers already in the document, balance), duplicates of
the suffix, and finally a parse check of the filled document (trim, else
drop). The steps live in shaping_steps.py, brackets.py and indentation.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from dllm_lsp.syntax.brackets import fit_brackets
from dllm_lsp.syntax.context import CompletionContext
from dllm_lsp.syntax.indentation import (
    align_first_line,
    body_on_new_line,
    convert_indentation,
    detected_indent_unit,
    leading,
    rescale_steps,
    tidy_inline_start,
)
from dllm_lsp.syntax.languages import LanguageSpec, parse
from dllm_lsp.syntax.parse_check import new_error_count
from dllm_lsp.syntax.shaping_steps import cap_lines, cursor_line, drop_repetition, drop_suffix_duplicate, stop_at_dedent

_HEAD_CHARS = 8192  # how much text the line-based steps look at, so large files stay cheap
_MAX_PARSE_TRIES = 6  # parse checks per completion (incremental parses of the filled document)


@dataclass(frozen=True)
class ShapedCompletion:
    text: str  # insert at offset ...
    replace_end: int  # ... replacing text[offset:replace_end] (closers already there)


def _parse_ok(text: str, offset: int, candidate: str, end: int, language, tree) -> bool:
    filled = text[:offset] + candidate + text[end:]
    span = (offset, offset + len(candidate))
    return new_error_count(text, filled, language, original_tree=tree, inserted=span) == 0


_DANGLING = " \t+-*/%.,=&|^<>!?:~"  # a trailing operator or separator left by a cut


def _trims(candidate: str):
    """Shorter versions to try when the full text adds parse errors.

    First without a dangling operator at the end, then dropping trailing lines,
    then (a single line) cutting words off its end: `value = None` after `return `
    does not parse, `value` does; the longest prefix that parses is what is shown.
    """
    lines = candidate.split("\n")
    for i in range(len(lines), 0, -1):
        head = "\n".join(lines[:i]).rstrip()
        if i < len(lines) and head.strip():
            yield head
        bare = head.rstrip(_DANGLING)
        if bare != head and bare.strip():
            yield bare
    if len(lines) == 1:
        line = lines[0]
        for cut in range(len(line.rstrip()) - 1, 0, -1):
            if line[cut] == " " and line[cut - 1] != " ":
                head = line[:cut].rstrip()
                bare = head.rstrip(_DANGLING)
                if bare.strip():
                    yield bare


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
    # Indentation style from the neighbourhood first (windows), then the file's head.
    detected = detected_indent_unit(ctx.prefix + ctx.suffix) or detected_indent_unit(text[:_HEAD_CHARS])
    unit = detected or "    "
    cur = cursor_line(text, offset, ctx.kind, unit)
    single_line = ctx.kind == "line"
    if single_line:
        comp = comp.split("\n")[0]
    comp = drop_repetition(comp, cur)
    if comp is None:
        return None
    comp = convert_indentation(comp, unit)
    indent_language = language is None or language.indent_style == "indent"
    if ctx.kind == "block" and cur.line_prefix.strip() and indent_language:
        comp = body_on_new_line(comp, cur.line_prefix, unit)
    comp = align_first_line(comp, cur.line_prefix, cur.expected_indent)
    if cur.line_prefix.strip():
        comp = tidy_inline_start(comp, cur.line_prefix)
    base = cur.line_prefix + leading(comp) if not cur.line_prefix.strip() else leading(cur.line_prefix)
    if detected:
        comp = rescale_steps(comp, len(base), unit)
    if not single_line and indent_language:
        comp = stop_at_dedent(comp, cur)
    if not single_line and ctx.max_lines:
        comp = cap_lines(comp, ctx.max_lines, cur.line_prefix if not cur.line_prefix.strip() else leading(cur.line_prefix))
    reaches_end = offset + len(ctx.suffix) >= len(text)
    comp, replaced = fit_brackets(comp, ctx.prefix, ctx.suffix, cur.line_suffix, language, single_line, reaches_end)
    comp = comp.rstrip()
    if not replaced:
        comp = drop_suffix_duplicate(comp, text[offset : offset + _HEAD_CHARS])
        if comp is None:
            return None
    if not comp.strip():
        return None
    end = offset + replaced
    if language is not None:
        tree = tree if tree is not None else parse(text, language)
        tries = 0
        for candidate in dict.fromkeys((comp, *_trims(comp))):
            if tries >= _MAX_PARSE_TRIES:
                return None
            tries += 1
            if _parse_ok(text, offset, candidate, end, language, tree):
                comp = candidate
                break
        else:
            return None
    if crlf:
        comp = comp.replace("\n", "\r\n")
    return ShapedCompletion(comp, end)
