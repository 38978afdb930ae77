"""A regenerated selection's first line at the depth the user chose (indentation.at_selection_depth)."""

import pytest

from dllm_lsp.syntax.indentation import at_selection_depth

TEXT = "def f(x):\n    y = x + 1\n    return y\n"
CODE = TEXT.index("y = ")  # where the line's code starts


@pytest.mark.parametrize("fill, start, kept", [
    ("    y = x - 1", CODE, "y = x - 1"),  # deeper than the user's line: the user's depth
    ("y = x - 1", CODE, "y = x - 1"),
    ("  y = 0", CODE - 2, "  y = 0"),  # the selection starts inside the indentation: the fill's
    ("    y = 0", TEXT.index("\n") + 1, "    y = 0"),  # at the line's first column: the fill's
    ("  1", TEXT.index("x + 1"), "  1"),  # inside a line's code: untouched
    ("\n    z = 2", CODE, "\n    z = 2"),  # a fill that starts with a line break: untouched
])
def test_a_fill_starts_at_the_selections_depth_where_the_line_code_starts(fill, start, kept):
    assert at_selection_depth(fill, TEXT, start) == kept


def test_a_line_of_code_at_the_files_first_column_keeps_the_fill():
    assert at_selection_depth("    x = 1", "x = 0\n", 0) == "    x = 1"


def test_dllm_lsp_infill_prints_every_fill_at_the_selections_depth():
    """`dllm-lsp infill --at` after a line's indentation (the README's demo) prints what the
    editor's regenerate would write: the best-read fill and the others, each at that depth."""
    from dllm_engine.protocol import HoleResult

    from dllm_lsp.commands.infill import fills_at_selection_depth

    hole = HoleResult(text="    y = 2", finish_reason="end", passes=3, tokens=4, alternatives=["y = 3", "  y = 4"])
    printed = fills_at_selection_depth(hole, TEXT, CODE)
    assert (printed.text, printed.alternatives, printed.passes) == ("y = 2", ["y = 3", "y = 4"], 3)
