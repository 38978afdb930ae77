"""A fill's blanks after its last line break go where the suffix brings its own indentation
(trailing_indent.py): inserted, they would push the suffix's first line deeper."""

import pytest

from dllm_engine.trailing_indent import trailing_indent_cut


def apply(fill: str, suffix: str) -> str:
    cut = trailing_indent_cut(fill, suffix)
    return fill if cut < 0 else fill[:cut]


@pytest.mark.parametrize("fill, suffix, kept", [
    # SmolLM2's merged "\n   " at the end of an oracle-length fill, before an indented suffix
    ("        ret = ret * 2 + 1\n   ", "    return ret\n", "        ret = ret * 2 + 1\n"),
    ("if p < 2:\n\t", "\treturn False\n", "if p < 2:\n"),
    ("x = 1\n    ", "\nprint(x)\n", "x = 1\n"),  # blanks on an empty line
    ("x = 1\n    ", "\r\nprint(x)\n", "x = 1\n"),
])
def test_blanks_before_a_suffix_with_its_own_indentation_go(fill, suffix, kept):
    assert apply(fill, suffix) == kept


@pytest.mark.parametrize("fill, suffix", [
    ("foo(\n    a,\n    ", "b)\n"),  # the suffix starts with text: the blanks are its indentation
    ("x = 1\n    ", ""),  # the end of the document: nothing to push
    ("x = 1\n", "    y = 2\n"),  # no blanks after the line break
    ("x = 1  ", "    y = 2\n"),  # no line break: blanks inside a line are the fill's
    ("x = 1\n    y", "    z\n"),  # text after the last line break
])
def test_everything_else_stays(fill, suffix):
    assert apply(fill, suffix) == fill
