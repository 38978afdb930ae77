"""Hole.stop_at_suffix (suffix_stop.py): the suffix's head, the cut, its validation at the
boundary, and the default model's fill ended where it starts writing the code after its hole,
in fewer passes (tests/bases/test_stop_rules_default.py, the real model)."""

import pytest
from pydantic import ValidationError

from dllm_engine.http_schemas import InfillBody
from dllm_engine.protocol import Hole, ProtocolError
from dllm_engine.suffix_stop import suffix_cut, suffix_head


@pytest.mark.parametrize("suffix, head", [
    ("    return total\n\nprint(1)\n", "    return total\n"),
    ("\n    return total\n", "\n    return total\n"),  # the hole ends a line: the break comes first
    ("\n\n\ndef main():\n    pass\n", "\n\n\ndef main():\n"),
    ("tring[:i+1])\n    return r\n", "tring[:i+1])\n"),  # the hole ends mid-line
    ("    }\n    return x;\n}\n", "    }\n    return x;\n"),  # punctuation alone: two lines
    ("  end\nfoo()\n", "  end\nfoo()\n"),  # three letters: too common alone
    (")", ")"),  # the last line of a file, short and alone: all of it
    ("value", "value"),
    ("", None),
    ("\n  \n\t\n", None),  # blanks alone: nothing the fill could repeat
])
def test_the_head_is_the_suffix_up_to_its_first_line_that_says_something(suffix, head):
    assert suffix_head(suffix) == head


@pytest.mark.parametrize("fill, suffix, kept", [
    # (the prefix ends with a line break: the fill starts a line)
    # HumanEval's single-line holes: the line, then the model goes on with the next one
    ("    total += 1\n    return total\n\n", "    return total\n", "    total += 1\n"),
    ("x = 1\n    return total\n", "\n    return total\n", "x = 1"),
    ("words(line)\n    return total", "\n    return total\n", None),  # not a whole line yet
    ("    return total\n", "    return total\n", ""),  # the model sees nothing to add
    ("    return totals\n", "    return total\n", None),  # another name: no echo
    ("        return total\n", "    return total\n", None),  # another indentation: no echo
    ("    }\n    }\n", "    }\n    return x;\n", None),  # a `}` alone is no echo
    ("a();\n    }\n    return x;\n", "\n    }\n    return x;\n", "a();"),
])
def test_the_fill_is_cut_before_the_suffixs_head(fill, suffix, kept):
    cut = suffix_cut(fill, suffix_head(suffix), "def f():\n")
    assert (fill[:cut] if cut >= 0 else None) == kept


def test_an_indented_head_counts_at_the_fills_start_only_where_a_line_starts():
    head = suffix_head("    return total\n")
    assert suffix_cut("    return total\n", head, "x = 1\n") == 0
    assert suffix_cut("    return total\n", head, "x = 1") == -1  # the fill goes on the prefix's line
    assert suffix_cut("    return total\n", head, "") == 0


def test_a_hole_without_the_rule_or_without_a_suffix_is_never_cut():
    assert suffix_cut("    return total\n", None) == -1
    assert suffix_cut("anything\n", suffix_head("")) == -1


def test_the_rule_is_on_unless_asked_off_and_checked_at_the_boundary():
    assert Hole(prefix="a").stop_at_suffix is True
    Hole(prefix="a", stop_at_suffix=False).validate()
    with pytest.raises(ProtocolError, match="stop_at_suffix must be true or false"):
        Hole(prefix="a", stop_at_suffix="no").validate()
    body = InfillBody.model_validate({"holes": [{"prefix": "a", "stop_at_suffix": False}]})
    assert body.build().holes[0].stop_at_suffix is False
    with pytest.raises(ValidationError):
        InfillBody.model_validate({"holes": [{"prefix": "a", "stop_at_suffix": 1}]})
