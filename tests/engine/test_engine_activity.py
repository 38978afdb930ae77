"""A request's wait in the queue, split by what the engine thread did meanwhile."""

from __future__ import annotations

import threading
import time

import pytest

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.engine_activity import ActivityLog
from dllm_engine.protocol import Hole, InfillRequest, InfillResult


def test_overlap_sums_each_kind_within_the_wait_only():
    log = ActivityLog()
    log.record("passes", 0.0, 1.0)
    log.record("scoring", 1.0, 3.0)
    log.record("passes", 3.0, 3.5)
    log.record("encoding", 4.0, 5.0)
    assert log.overlap(2.0, 4.5) == {"scoring": 1000.0, "passes": 500.0, "encoding": 500.0}
    assert log.overlap(5.0, 6.0) == {}


def test_the_work_under_way_counts_up_to_now():
    log = ActivityLog()
    log.record("encoding", 0.0, 1.0)
    with log.span("passes"):
        import time as clock

        now = clock.monotonic()
        got = log.overlap(now - 0.5, now + 0.25)
    assert set(got) == {"passes"} and 240 <= got["passes"] <= 260


def test_old_spans_are_let_go():
    log = ActivityLog(keep=3)
    for i in range(10):
        log.record("passes", float(i), i + 0.5)
    assert log.overlap(0.0, 100.0) == {"passes": 1500.0}


@pytest.fixture(scope="module")
def engine(tiny_shifted_model):
    e = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1))
    yield e
    e.shutdown()


def test_a_request_behind_background_work_says_it_waited_for_it(engine):
    """The keystroke replay's slowest answers were queued 0.1-1.3 s; the result says behind
    what (here a background call of 0.3 s on the engine thread, as hints' scoring is)."""
    running = threading.Event()

    def hold() -> None:
        running.set()
        time.sleep(0.3)

    background = threading.Thread(target=lambda: engine.between_passes(hold, "scoring"))
    background.start()
    assert running.wait(10)
    result = engine.infill(InfillRequest(holes=[Hole(prefix="def f(x):\n    return ", suffix="\n", max_tokens=2)]))
    background.join()
    assert result.queued_for.get("scoring", 0) >= 150 and result.queued_ms >= result.queued_for["scoring"]
    assert InfillResult.from_dict(result.to_dict()).queued_for == result.queued_for  # as the daemon sends it
    alone = engine.infill(InfillRequest(holes=[Hole(prefix="def g(x):\n    return ", suffix="\n", max_tokens=2)]))
    assert "scoring" not in alone.queued_for
    # While it ran: its own passes (the last one, still under way when it is answered, too).
    assert alone.active_for.get("passes", 0) > 0 and sum(alone.active_for.values()) <= alone.elapsed_ms
