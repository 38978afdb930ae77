"""The stop rules on the default model: a multi-line fill ends where its block does
(Hole.stop_indent), after its lines (Hole.max_lines) or where it writes the code after its hole
again (Hole.stop_at_suffix), in fewer passes, with the text of the fill without the rule cut by
the same rule. fp32, so "the same" is exact. Each rule alone: the fill's end is not chosen by
reading (Hole.choose_end, tests/bases/test_fill_end_default.py)."""

import pytest

from dllm_engine.dedent_stop import dedent_cut
from dllm_engine.line_cap import line_cap_cut
from dllm_engine.protocol import Hole, InfillRequest
from dllm_engine.suffix_stop import suffix_cut, suffix_head


@pytest.fixture
def engine(fp32_engine):
    return fp32_engine  # tests/bases/conftest.py


PREFIX = "def read_lines(path):\n    lines = []\n    with open(path) as f:\n        "
SUFFIX = "\n    return lines\n"


def test_a_multi_line_fill_stops_where_its_block_ends(engine):
    free = engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=64,
                                                    stop_at_suffix=False, choose_end=False)])).holes[0]
    cut = dedent_cut(free.text, 8)
    assert cut >= 0, f"the free fill never left its block: {free.text!r}"
    stopped = engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=64,
                                                      stop_indent=8, stop_at_suffix=False, choose_end=False)])).holes[0]
    assert stopped.text == free.text[:cut] and stopped.finish_reason == "end"
    assert stopped.passes < free.passes


def test_a_fill_ends_where_it_writes_the_code_after_its_hole_again(engine):
    """The default model fills the `with` block, then writes the suffix's `return lines`."""
    def fill(rule):
        return engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=64,
                                                       stop_at_suffix=rule, choose_end=False)])).holes[0]

    free = fill(False)
    cut = suffix_cut(free.text, suffix_head(SUFFIX), PREFIX)
    assert cut > 0, f"the free fill never wrote the suffix's first line: {free.text!r}"
    stopped = fill(True)
    assert stopped.text == free.text[:cut] and stopped.finish_reason == "end"
    assert stopped.passes < free.passes


BODY = "def parse_args(argv):\n    "  # an empty body: the model writes six lines
AFTER = "\n\n\ndef main():\n    pass\n"


def test_an_empty_bodys_fill_ends_after_its_lines(engine):
    def fill(max_lines):
        return engine.infill(InfillRequest(holes=[Hole(prefix=BODY, suffix=AFTER, max_tokens=128, stop_indent=4,
                                                       max_lines=max_lines, choose_end=False)])).holes[0]

    free = fill(None)
    cut = line_cap_cut(free.text, 2)
    assert cut >= 0, f"the free fill has fewer than three lines: {free.text!r}"
    capped = fill(2)
    assert capped.text == free.text[:cut] and capped.finish_reason == "end"
    assert capped.passes < free.passes


# A method whose neighbours have docstrings: the default model starts its body with one.
METHOD = ('class Config:\n    """Settings read from a file."""\n\n    def __init__(self, path):\n'
          '        """Read the settings at path."""\n        self.path = path\n\n    def reload(self):\n        ')


def test_an_empty_body_starts_with_code_when_prose_is_banned(engine):
    from dllm_lsp.syntax.languages import language_named

    prose = language_named("python").prose_starts

    def fill(bans):
        return engine.infill(InfillRequest(holes=[Hole(prefix=METHOD, suffix="\n", max_tokens=128, stop_indent=8,
                                                       max_lines=4, stop_repeats=True, banned_starts=bans)])).holes[0]

    free, code = fill(()), fill(prose)
    assert free.text.startswith('"""'), f"the model no longer starts with a docstring here: {free.text!r}"
    assert code.text.strip() and not code.text.lstrip().startswith(prose), code.text
    assert code.passes < free.passes  # a docstring and code, or code alone


def test_a_fill_that_ends_on_a_fresh_line_leaves_the_suffix_its_own_indentation(engine):
    """A fixed-length fill (an oracle length, a range) whose last token is SmolLM2's merged line
    break and indentation: the blanks go (trailing_indent.py), so the suffix's first line keeps
    its own indentation instead of 15 spaces."""
    prefix = "def total(items):\n    ret = 0\n    for item in items:\n"
    suffix = "    return ret\n"
    res = engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=7, bucket=7)])).holes[0]
    assert res.tokens == 7 and res.text.endswith("\n"), res.text  # the canvas's last token holds the line break
    assert (prefix + res.text + suffix).splitlines()[-1] == "    return ret"
