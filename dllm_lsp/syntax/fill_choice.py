"""Which of several fills of one hole the file parses with: best of N's fills come best read
first (the model's own reading of each fill with the code after it), and the first of those
that leaves the file with the fewest syntax errors is the one to offer.

Why: the model's reading favours short fills, an empty one most of all, and a fill the file
does not parse with is never what the user wanted while another fill parses. On HumanEval
single-line `tasks[::5]` best of 8 chose a fill that broke the program for tasks where another
candidate passed (benchmarks/RESULTS.md, forty-fourth session).

The server hands in the document it already parsed (`Original`): each filled text is then
parsed from that tree (an edit, not a fresh parse) and, for Python, only the top-level
statements around the fill are compiled, so the choice costs about the same in a 2,600-line
module as in a 200-line one (a fresh parse and compile were ~35 ms a fill there).
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from dllm_lsp.syntax.languages import LanguageSpec, parse
from dllm_lsp.syntax.parse_check import error_spans, parse_spliced, python_rejects_while_typing, statements_around


@dataclass(frozen=True)
class Original:
    """The document the fills go into, and its tree (matching `text`)."""

    text: str
    tree: tree_sitter.Tree


def syntax_errors(text: str, language: LanguageSpec, original: Original | None = None,
                  span: tuple[int, int] | None = None) -> int:
    """ERROR and MISSING nodes of the file, plus one where CPython rejects a Python file that
    tree-sitter accepts (a block with no body parses there, not in CPython). What the file
    lacks at its very end (a `}` not yet typed, a block header on the last line with no body
    yet) is incomplete, not wrong, while typing: not counted, so a fill that opens a block at
    the end of what is written does not lose to one that does not.

    With `original` and `span` (where in `text` the fill is; the rest is `original.text`), the
    parse starts from the original's tree and CPython compiles only the statements around the
    fill: an error far from it is the same for every fill and does not tell them apart."""
    spliced = original is not None and span is not None
    tree = parse_spliced(original.text, text, language, original.tree, *span) if spliced else parse(text, language)
    end = len(text.rstrip().encode("utf-8", "surrogatepass"))
    count = sum(1 for start, stop in error_spans(tree) if not (start == stop and start >= end))
    if language.name == "python" and not count:
        checked = statements_around(text, tree, *span) if spliced else text
        count = int(python_rejects_while_typing(checked))
    return count


def fewest_errors(filled: list[str], language: LanguageSpec | None, original: Original | None = None,
                  spans: list[tuple[int, int]] | None = None) -> int:
    """Index into `filled` (the file with each fill in its hole, the best-read fill first) of
    the first with the fewest syntax errors; 0 for a language without a grammar or one fill.
    `original` and `spans` (each fill's place in its text) make each parse an edit of the
    original's tree. The fills are read in order and the first that leaves no error ends the
    search: most best-read fills parse, and then nothing else is parsed."""
    if language is None or len(filled) < 2:
        return 0
    best, fewest = 0, None
    for i, text in enumerate(filled):
        count = syntax_errors(text, language, original, spans[i] if spans is not None else None)
        if count == 0:
            return i
        if fewest is None or count < fewest:
            best, fewest = i, count
    return best
