"""Scoring existing code: every token gets the model's probability and alternative."""

import pytest
import torch

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import ProtocolError, ScoreRequest


@pytest.fixture(scope="module")
def engine(tiny_model):
    e = Engine(EngineConfig(model=str(tiny_model), threads=1))
    yield e
    e.shutdown()


def test_every_token_is_scored_with_offsets(engine):
    span = "    total = totl + 1\n"
    r = engine.score(ScoreRequest(prefix="def f(total):\n", span=span, suffix="    return total\n"))
    assert "".join(t.text for t in r.tokens) == span
    assert all(0.0 <= t.prob <= 1.0 and t.alternative_prob >= t.prob - 1e-6 for t in r.tokens)
    assert [span[t.start:t.end] for t in r.tokens] == [t.text for t in r.tokens]


@torch.inference_mode()
def test_scores_match_masking_one_token_at_a_time(engine):
    """stride=4 in one batch gives what four separate masked passes give."""
    prefix, span, suffix = "x = [", "1, 2, 3, 4, 5", "]\n"
    batched = engine.score(ScoreRequest(prefix=prefix, span=span, suffix=suffix, stride=4))
    ids = engine.tokenizer.encode(span)
    runner = engine.runner
    ctx = runner.encode_context(engine.tokenizer.encode(prefix), engine.tokenizer.encode(suffix), len(ids))
    for j in range(len(ids)):
        canvas = torch.tensor(ids)
        canvas[torch.arange(len(ids)) % 4 == j % 4] = engine.special.mask
        logits = runner.canvas_logits([ctx], canvas[None], torch.tensor([len(ids)]))[0].float()
        logits[:, list(engine.special.banned)] = float("-inf")
        p = logits.softmax(-1)[j, ids[j]]
        assert abs(float(p) - batched.tokens[j].prob) < 1e-4
    runner.forget_batch()


def test_bad_score_requests(engine):
    with pytest.raises(ProtocolError):
        engine.score(ScoreRequest(prefix="", span=""))
    with pytest.raises(ProtocolError):
        engine.score(ScoreRequest(prefix="", span="x", stride=0))
