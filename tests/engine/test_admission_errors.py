"""A request that fails while being admitted (tokenizing, activation) is answered, alone.

Issue 16, defect 1: the engine loop failed only active holes, so a request that
raised during admission kept a future that never completed, and the good
requests admitted with it waited too. On the shipped default model.
"""

from concurrent.futures import TimeoutError as FutureTimeout

import pytest

from dllm_engine.protocol import Hole, InfillRequest, ProtocolError

GOOD = [Hole(prefix=f"def f{i}(x):\n    return ", suffix="\n", max_tokens=8) for i in range(4)]


@pytest.fixture(scope="module")
def engine(default_engine):
    return default_engine


class Unchecked(InfillRequest):
    """A request that skips validation: stands for any bug that lets a bad field reach admission."""

    def validate(self) -> None:
        return None


def submit_with_good_ones(engine, bad: InfillRequest):
    """Submit the bad request among four good ones, all before the engine thread wakes."""
    handles = []
    with engine._cond:  # hold the loop so that all five are admitted in one batch
        handles.append(engine.submit(bad))
        handles += [engine.submit(InfillRequest(holes=[h])) for h in GOOD]
    return handles[0], handles[1:]


def assert_good_ones_answered(good):
    for handle in good:
        result = handle.result(timeout=60)
        assert result.holes[0].passes >= 1


@pytest.mark.parametrize("prefix,suffix", [("x = \ud800", ""), ("x = 1\n", "\udc00 # half an emoji")])
def test_a_lone_surrogate_fails_that_request_alone(engine, prefix, suffix):
    bad, good = submit_with_good_ones(engine, InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix)]))
    with pytest.raises(ProtocolError, match="hole 0"):
        bad.result(timeout=20)
    assert_good_ones_answered(good)


@pytest.mark.parametrize("field,value", [("bucket", 2.5), ("stop", {"a": 1}), ("max_tokens", 2.5)])
def test_any_admission_error_fails_that_request_alone(engine, field, value):
    hole = Hole(prefix="y = ")
    object.__setattr__(hole, field, value)
    bad, good = submit_with_good_ones(engine, Unchecked(holes=[Hole(prefix="z = ", max_tokens=4), hole]))
    try:
        bad.result(timeout=20)
    except FutureTimeout:
        pytest.fail("a request that failed during admission was never answered")
    except Exception as exc:
        assert "hole 1" in str(exc)
    else:
        pytest.fail("the bad request was answered as if it were fine")
    assert_good_ones_answered(good)
    assert not engine.scheduler.active and engine.scheduler.queue_depth == 0
    # The engine still serves afterwards.
    assert engine.infill(InfillRequest(holes=[GOOD[0]]), timeout=60).holes[0].passes >= 1


@pytest.mark.parametrize("kwargs,field", [
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"bucket": 2.5}, "bucket"),
    ({"bucket": True}, "bucket"),
    ({"stop": {"a": 1}}, "stop"),
    ({"stop": "\n"}, "stop"),
])
def test_validation_refuses_non_integers_and_non_lists(kwargs, field):
    with pytest.raises(ProtocolError, match=field):
        InfillRequest(holes=[Hole(prefix="x", **kwargs)]).validate()


def test_the_stop_mask_cache_has_a_budget(engine):
    """Stop strings come from clients: one mask per distinct set must not grow without bound."""
    from dllm_engine.engine import STOP_CACHE_ENTRIES

    for i in range(STOP_CACHE_ENTRIES + 10):
        engine._stop_ids((f"stop{i}",))
    assert len(engine._stop_cache) == STOP_CACHE_ENTRIES


def test_a_tiny_positive_temperature_is_refused():
    """Found by the daemon fuzz: temperature 1.7e-226 made logits / T overflow, and the NaN
    probabilities failed the whole pass (every request batched with it)."""
    from dllm_engine.protocol import DiffusionParams

    with pytest.raises(ProtocolError, match="temperature"):
        DiffusionParams(temperature=1.7e-226).validate()
    DiffusionParams(temperature=0.0).validate()
    DiffusionParams(temperature=0.001).validate()
