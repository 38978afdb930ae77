"""Hole.stop_indent (dedent_stop.py): the rule and its validation at the boundary (on the
default model: tests/bases/test_stop_rules_default.py)."""

import pytest

from dllm_engine.dedent_stop import dedent_cut
from dllm_engine.http_schemas import InfillBody
from dllm_engine.protocol import Hole, InfillRequest, ProtocolError


def test_the_first_line_that_leaves_the_block():
    assert dedent_cut("x = 1\n        y = 2\n    return y\n", 8) == len("x = 1\n        y = 2")
    assert dedent_cut("x = 1\n\n        y = 2\n", 8) == -1  # blank lines do not leave the block
    assert dedent_cut("x = 1\n    ", 8) == -1  # blanks alone: the line's text has not come yet
    assert dedent_cut("return x\nz", 1) == len("return x")
    assert dedent_cut("\tif a:\n\t\tb\n\tc", 2) == len("\tif a:\n\t\tb")  # a tab is one character
    assert dedent_cut("one line", 4) == -1


def test_bad_stop_indent_is_refused_at_the_boundary():
    for bad in (0, -1, 2000, 2.5, True, "4"):
        with pytest.raises(ProtocolError, match="stop_indent"):
            Hole(prefix="x", stop_indent=bad).validate()
    body = InfillBody.model_validate({"holes": [{"prefix": "x", "stop_indent": 4}]})
    assert body.holes[0].build().stop_indent == 4
    with pytest.raises(Exception):
        InfillBody.model_validate({"holes": [{"prefix": "x", "stop_indent": 0}]})
    req = InfillRequest(holes=[Hole(prefix="x", stop_indent=4)])
    assert InfillRequest.from_dict(req.to_dict()).holes[0].stop_indent == 4  # the daemon's wire form
