"""Which of several fills of one hole the file parses with: best of N's fills come best read
first (the model's own reading of each fill with the code after it), and the first of those
that leaves the file with the fewest syntax errors is the one to offer.

Why: the model's reading favours short fills, an empty one most of all, and a fill the file
does not parse with is never what the user wanted while another fill parses. On HumanEval
single-line `tasks[::5]` best of 8 chose a fill that broke the program for tasks where another
candidate passed (benchmarks/RESULTS.md, forty-fourth session).
"""

from __future__ import annotations

from dllm_lsp.syntax.languages import LanguageSpec, parse
from dllm_lsp.syntax.parse_check import error_spans, python_rejects_while_typing


def syntax_errors(text: str, language: LanguageSpec) -> int:
    """ERROR and MISSING nodes of the file, plus one where CPython rejects a Python file that
    tree-sitter accepts (a block with no body parses there, not in CPython). What the file
    lacks at its very end (a `}` not yet typed, a block header on the last line with no body
    yet) is incomplete, not wrong, while typing: not counted, so a fill that opens a block at
    the end of what is written does not lose to one that does not."""
    end = len(text.rstrip().encode("utf-8"))
    count = sum(1 for start, stop in error_spans(parse(text, language)) if not (start == stop and start >= end))
    if language.name == "python" and not count and python_rejects_while_typing(text):
        count = 1
    return count


def fewest_errors(filled: list[str], language: LanguageSpec | None) -> int:
    """Index into `filled` (the file with each fill in its hole, the best-read fill first) of
    the first with the fewest syntax errors; 0 for a language without a grammar or one fill."""
    if language is None or len(filled) < 2:
        return 0
    counts = [syntax_errors(text, language) for text in filled]
    return counts.index(min(counts))
