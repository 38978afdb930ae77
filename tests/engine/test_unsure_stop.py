"""Hole.min_token_prob (unsure_stop.py): the rule, its validation at the boundary, and a real
model's fills ending at their first unsure token, in fewer passes. Drafted tokens (the default
model's decoding): tests/bases/test_unsure_stop_default.py."""

import pytest
import torch

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.http_schemas import InfillBody
from dllm_engine.protocol import Hole, InfillRequest, ProtocolError
from dllm_engine.unsure_stop import unsure_slot


def _t(*values, dtype=torch.bool):
    return torch.tensor(values, dtype=dtype)


def test_the_first_unsure_slot_of_the_fill_counts():
    committed = _t(True, True, True, False)
    probs = _t(0.9, 0.1, 0.05, 0.0, dtype=torch.float32)
    none_end = _t(False, False, False, False)
    assert unsure_slot(committed, probs, none_end, 0.2) == 1
    assert unsure_slot(committed, probs, none_end, 0.08) == 2
    assert unsure_slot(committed, probs, none_end, 0.01) is None
    # an end (or stop) token is the fill's last: a slot after it is not the fill's ...
    assert unsure_slot(committed, probs, _t(True, False, False, False), 0.2) is None
    # ... but the end itself counts (a model unsure where the line ends is unsure of the line)
    assert unsure_slot(committed, probs, _t(False, True, False, False), 0.2) == 1
    # a slot not committed this pass (committed earlier, or still masked) is not looked at again
    assert unsure_slot(_t(True, False, False, False), probs, none_end, 0.2) is None


def test_bad_min_token_prob_is_refused_at_the_boundary():
    for bad in (0, 0.0, 1, 1.0, -0.5, True, "0.2", float("nan")):
        with pytest.raises(ProtocolError, match="min_token_prob"):
            Hole(prefix="x", min_token_prob=bad).validate()
    Hole(prefix="x", min_token_prob=0.15).validate()
    body = InfillBody.model_validate({"holes": [{"prefix": "x", "min_token_prob": 0.15}]})
    assert body.holes[0].build().min_token_prob == 0.15
    for bad in (0.0, 1.0, "0.2", True):
        with pytest.raises(Exception):
            InfillBody.model_validate({"holes": [{"prefix": "x", "min_token_prob": bad}]})
    req = InfillRequest(holes=[Hole(prefix="x", min_token_prob=0.25)])
    assert InfillRequest.from_dict(req.to_dict()).holes[0].min_token_prob == 0.25  # the daemon's wire form


# The last two end in a new line's indentation: token healing backs it up, and the first token
# (a newline and blanks) is a stop token only by the healed slot's own table (advance()).
PREFIXES = ["def add(a, b):\n    return ", "import os\n\npath = os.path.", "for i in range(",
            "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "def area(w, h):\n    "]


@pytest.fixture(scope="module")
def engine():
    e = Engine(EngineConfig(model="small", threads=1))
    yield e
    e.shutdown()


def _fill(engine, prefix, floor):
    return engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix="\n\nprint(1)\n", max_tokens=24,
                                                   stop=("\n",), min_token_prob=floor)])).holes[0]


def test_a_real_models_fill_ends_at_its_first_unsure_token(engine):
    plain_engine = engine
    cut = shortened = 0
    for prefix in PREFIXES:
        plain = _fill(plain_engine, prefix, None)
        assert plain.finish_reason != "unsure"
        assert _fill(plain_engine, prefix, 1e-9).text == plain.text  # nothing that unlikely: the same fill
        previous = plain.text
        for floor in (0.05, 0.3, 0.6, 0.999):
            gated = _fill(plain_engine, prefix, floor)
            # greedy: the same tokens up to the unsure one, nothing after it
            assert plain.text.startswith(gated.text), (prefix, floor, gated.text, plain.text)
            assert previous.startswith(gated.text)  # a higher floor never lets more through
            if gated.finish_reason == "unsure":
                cut += 1
                assert gated.passes <= plain.passes
                shortened += gated.passes < plain.passes
            else:
                assert gated.text == plain.text
            previous = gated.text
    assert cut >= len(PREFIXES), "no fill was unsure at 0.999: the test no longer covers the rule"
    assert shortened >= 1, "no unsure fill ended early: its remaining passes ran anyway"
