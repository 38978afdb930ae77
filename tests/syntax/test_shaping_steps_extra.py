"""A fill that continues a line of code does not start with a run of spaces."""

from dllm_lsp.syntax.context import completion_context
from dllm_lsp.syntax.indentation import tidy_inline_start
from dllm_lsp.syntax.languages import language_for
from dllm_lsp.syntax.shaping import shape_completion


def test_tidy_inline_start():
    assert tidy_inline_start("    None", "    value = ") == "None"
    assert tidy_inline_start("   x)", "    print(") == " x)"
    assert tidy_inline_start("x + 1", "    y = ") == "x + 1"
    assert tidy_inline_start("\n    pass", "def f():") == "\n    pass"


def test_mid_line_fill_has_no_space_run():
    text = "def shout(text):\n    value = \n    return value.upper()\n"
    offset = text.index("value = ") + len("value = ")
    lang = language_for("x.py")
    ctx = completion_context(text, offset, lang)
    shaped = shape_completion(text, offset, "    text\n", ctx, lang)
    assert shaped is not None and shaped.text == "text"
