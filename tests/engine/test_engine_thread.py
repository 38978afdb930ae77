"""One thread does all of the model's work (engine_calls.py): loading, every pass, scoring, next
edit's streams and cache drops run on the engine thread, whichever thread asks. A second
thread running torch's OpenMP ops gets a team of its own, and with two teams on two cores a
decoding pass of the default model took ~1.7x as long (benchmarks/RESULTS.md, eleventh session).
The queue itself: results and errors reach the caller, a call from the engine thread runs at
once, nothing waits forever after shutdown or a failed load.
"""

from __future__ import annotations

import threading

import pytest

from dllm_engine import engine as engine_module
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.next_edit import NextEditRequest, RecentEdit
from dllm_engine.next_edit.region_pass import supports
from dllm_engine.protocol import Hole, InfillRequest, ScoreRequest

DOC = "def area(width, height):\n    return w * height + w\n\n\ndef main():\n    print(area(2, 3))\n"
AT = DOC.index("width")


@pytest.fixture
def recorded(tiny_shifted_model, monkeypatch):
    """A tiny shifted-logit engine (the default model's decoding, next edit's streams) and the
    names of the threads that ran `load` and each model forward."""
    threads: list[str] = []
    real_load = engine_module.load

    def load(*args, **kwargs):
        threads.append(("load", threading.current_thread().name))
        loaded = real_load(*args, **kwargs)
        forward = loaded.model.forward

        def recording(*a, **kw):
            threads.append(("forward", threading.current_thread().name))
            return forward(*a, **kw)

        loaded.model.forward = recording
        return loaded

    monkeypatch.setattr(engine_module, "load", load)
    e = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1, dtype="float32", weights="native"))
    yield e, threads
    e.shutdown()


def test_load_passes_scores_and_next_edit_all_run_on_the_engine_thread(recorded):
    e, threads = recorded
    assert supports(e)  # next edit runs its own stream of forwards (region_pass.py)
    e.infill(InfillRequest(holes=[Hole(prefix="def f(x):\n    return ", suffix="\n", max_tokens=6)]), timeout=60)
    e.score(ScoreRequest(prefix="x = ", span="y + 1", suffix="\n"))
    e.next_edit(NextEditRequest(document=DOC, edits=[RecentEdit(offset=AT, removed="w", inserted="width")],
                                region_start_line=0, region_end_line=6, cursor=AT + 5))
    e.drop_caches()
    kinds = {kind for kind, _ in threads}
    assert kinds == {"load", "forward"}
    assert sum(kind == "forward" for kind, _ in threads) >= 3
    assert {name for _, name in threads} == {"dllm-engine"}, threads
    assert threading.current_thread().name != "dllm-engine"


def test_calls_return_results_and_raise_errors_in_the_caller(recorded):
    e, _ = recorded
    assert e.between_passes(lambda: threading.current_thread().name) == "dllm-engine"

    def broken():
        raise ValueError("bad call")

    with pytest.raises(ValueError, match="bad call"):
        e.between_passes(broken)
    # the engine is unharmed: the next request is served
    assert e.infill(InfillRequest(holes=[Hole(prefix="a = ", suffix="\n", max_tokens=4)]), timeout=60).holes


def test_a_call_from_the_engine_thread_runs_at_once(recorded):
    """A request's callbacks run on the engine thread: a score from one must not wait for itself."""
    e, _ = recorded
    scores = []

    def on_event(event):
        if not scores:
            scores.append(e.score(ScoreRequest(prefix="x = ", span="1", suffix="\n")))

    handle = e.submit(InfillRequest(holes=[Hole(prefix="b = ", suffix="\n", max_tokens=4)], stream=True),
                      on_event=on_event)
    assert handle.result(timeout=60).holes
    assert scores and scores[0].tokens


def test_no_call_waits_after_shutdown(tiny_shifted_model):
    e = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1, dtype="float32", weights="native"))
    e.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        e.between_passes(lambda: None)


def test_a_load_error_is_raised_by_the_constructor(tmp_path):
    with pytest.raises(Exception) as caught:
        Engine(EngineConfig(model=str(tmp_path / "no-such-model"), threads=1))
    assert "no-such-model" in str(caught.value)


EXIT_MID_PASS = """
import time
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import Hole, InfillRequest
e = Engine(EngineConfig(threads=2))  # the small model
e.infill(InfillRequest(holes=[Hole(prefix="def f(x):\\n    return ", suffix="\\n", max_tokens=8)]))
e.submit(InfillRequest(holes=[Hole(prefix="def g(x):\\n    return ", suffix="\\n", max_tokens=48)]))
time.sleep(0.02)  # the process ends while that request's passes run, with no shutdown()
print("ended")
"""


def test_a_process_that_ends_mid_pass_without_shutdown_exits_cleanly():
    """Before the exit hook the interpreter finalized under the running engine thread: the
    process aborted (exit 134, "terminate called without an active exception")."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "2", "DLLM_LSP_MODEL": "small"}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", EXIT_MID_PASS], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0 and "terminate" not in done.stderr, (done.returncode, done.stderr[-2000:])
        assert done.stdout.strip() == "ended"
