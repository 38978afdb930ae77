"""A single line's end on the default model's own draft head (EngineConfig.head_end_prob,
head_end.py): where the head is sure the line ends, the fill ends without the pass that would
only have committed the line break; the same line. fp32, so "the same" is exact."""

import pytest

from dllm_engine.protocol import Hole, InfillRequest

# lines the head is sure end where the base ends them, after a pass that had not drafted the break
SAVED = [
    Hole(prefix="import os\n\n\ndef home():\n    return os.path.", suffix="\n", max_tokens=24, stop=("\n",)),
    Hole(prefix="def greet(name):\n    print(", suffix="\n", max_tokens=24, stop=("\n",)),
]
# lines whose break the last pass's draft held anyway
SAME = [
    Hole(prefix="def area(width, height):\n    return ", suffix="\n", max_tokens=24, stop=("\n",)),
    Hole(prefix="import json\n\n\ndef load(path):\n    with open(path) as f:\n        data = ",
         suffix="\n    return data\n", max_tokens=24, stop=("\n",)),
]


@pytest.fixture
def engine(fp32_engine):
    default = fp32_engine.config.head_end_prob
    yield fp32_engine  # tests/bases/conftest.py
    fp32_engine.config.head_end_prob = default


def _fill(engine, hole, prob):
    engine.config.head_end_prob = prob
    return engine.infill(InfillRequest(holes=[hole])).holes[0]


def test_a_line_the_head_ends_takes_a_pass_fewer_and_says_the_same(engine):
    assert engine.config.head_end_prob == 0.8  # the default (these holes were chosen at 0.9, on the bare base)
    for hole in SAVED:
        checked, ended = _fill(engine, hole, 0.0), _fill(engine, hole, 0.9)
        assert ended.text == checked.text and ended.text.strip()
        assert ended.passes == checked.passes - 1, (hole.prefix, ended.committed_per_pass, checked.committed_per_pass)
    for hole in SAME:
        checked, ended = _fill(engine, hole, 0.0), _fill(engine, hole, 0.9)
        assert (ended.text, ended.passes) == (checked.text, checked.passes)


def test_a_fill_without_stop_strings_is_left_to_the_base(engine):
    hole = Hole(prefix="def greet(name):\n    print(", suffix="\n", max_tokens=12, choose_end=False)
    assert _fill(engine, hole, 0.9) == _fill(engine, hole, 0.0)
