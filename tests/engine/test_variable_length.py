"""Variable length: padding is stripped, a full canvas grows, max_tokens caps it.

The model is replaced by scripted logits (the denoiser and engine loop are real),
so the length behaviour is checked exactly.
"""

import pytest
import torch

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest


def scripted(engine, target, p_target=0.95, p_pad_inside=0.0):
    """Slot j predicts target[j] (then <pad>); optionally with a tempting pad inside the fill."""
    pad = engine.special.end[0]
    vocab = engine.loaded.config.vocab_size

    def canvas_logits(contexts, canvases, lens, rows=None, compact=False):
        b, length = canvases.shape
        probs = torch.full((b, length, vocab), 1e-6)
        for j in range(length):
            if j < len(target):
                probs[:, j, target[j]] = p_target
                probs[:, j, pad] = p_pad_inside
            else:
                probs[:, j, pad] = 0.99
        logits = probs.log()
        return logits[rows] if compact else logits  # compact: the masked slots' rows only

    engine.runner.canvas_logits = canvas_logits


@pytest.fixture()
def engine(tiny_model):
    e = Engine(EngineConfig(model=str(tiny_model), threads=1))
    yield e
    e.shutdown()


def target_ids(engine, text):
    return engine.tokenizer.encode(text)


def test_padding_is_stripped(engine):
    target = target_ids(engine, "name.endswith('.py')")
    scripted(engine, target)
    h = engine.infill(InfillRequest(holes=[Hole(prefix="x = ", max_tokens=64, bucket=16)])).holes[0]
    assert h.text == "name.endswith('.py')"
    assert h.finish_reason == "end"
    assert h.tokens == len(target)


def test_full_canvas_grows_until_the_end(engine):
    text = "return sorted(set(line.strip() for line in lines if line and not line.startswith('#')))"
    target = target_ids(engine, text)
    assert len(target) > 16
    scripted(engine, target)
    h = engine.infill(InfillRequest(holes=[Hole(prefix="x = ", max_tokens=128, bucket=8)])).holes[0]
    assert h.text == text
    assert h.finish_reason == "end"


def test_max_tokens_caps_growth(engine):
    target = target_ids(engine, "a + b " * 40)
    scripted(engine, target)
    h = engine.infill(InfillRequest(holes=[Hole(prefix="x = ", max_tokens=20, bucket=8)])).holes[0]
    assert h.finish_reason == "max_tokens"
    assert h.tokens == 20


def test_pad_cannot_spread_from_the_right_edge(engine):
    # Inside the fill the model is torn between the token and padding (0.5 vs 0.45),
    # while padding at the right edge is near certain: a naive confidence-ordered
    # decoder would commit pads first and end with an empty fill.
    target = target_ids(engine, "total += len(line.split())")
    scripted(engine, target, p_target=0.5, p_pad_inside=0.45)
    h = engine.infill(InfillRequest(holes=[Hole(prefix="x = ", max_tokens=64, bucket=32)],
                                    params=DiffusionParams(threshold=0.9))).holes[0]
    assert h.text == "total += len(line.split())"


def test_threshold_commits_many_tokens_per_pass(engine):
    target = target_ids(engine, "for i in range(10):")
    scripted(engine, target, p_target=0.97)
    h = engine.infill(InfillRequest(holes=[Hole(prefix="", max_tokens=16, bucket=16)],
                                    params=DiffusionParams(threshold=0.9))).holes[0]
    assert h.passes <= 2
    one = engine.infill(InfillRequest(holes=[Hole(prefix="", max_tokens=16, bucket=16)],
                                      params=DiffusionParams(threshold=1.5))).holes[0]
    assert one.text == h.text
    assert one.committed_per_pass == [1] * one.passes


def test_stop_string_ends_the_canvas_early(engine):
    # The model wants to write two lines; a rest-of-line hole stops at the newline and
    # never denoises the slots after it.
    target = target_ids(engine, "x + 1\n    return y + 2")
    scripted(engine, target, p_target=0.5)  # one token per pass
    h = engine.infill(InfillRequest(holes=[Hole(prefix="y = ", max_tokens=32, bucket=32, stop=("\n",))])).holes[0]
    assert h.text == "x + 1"
    assert h.finish_reason == "end"
    newline_slot = next(i for i, t in enumerate(target) if "\n" in engine.tokenizer.decode([t]))
    assert h.passes <= newline_slot + 1  # nothing after the newline was denoised
    free = engine.infill(InfillRequest(holes=[Hole(prefix="y = ", max_tokens=32, bucket=32)])).holes[0]
    assert free.text.startswith("x + 1\n") and free.passes > h.passes
