"""mmap_threshold.py: a context's encoding runs with glibc's mmap threshold raised, when the
process fixed a lower one, and puts the fixed one back; glibc's own moving threshold is never
touched. What the raise does to real blocks is tested against glibc in
tests/lsp/test_malloc_arenas.py; here, that every way a context is encoded goes through it, on
the small model (mallopt recorded, not called: the test process keeps glibc's own behaviour)."""

from __future__ import annotations

import pytest

from dllm_engine import mmap_threshold
from dllm_engine.checkpoint import SMALL_MODEL_DIR
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.prepare import PrepareRequest
from dllm_engine.protocol import Hole, InfillRequest

FIXED = 256 * 1024
PREFIX = "import os\n\n\ndef size_of(path):\n    "
SUFFIX = "\n\n\ndef main():\n    print(size_of('.'))\n"


@pytest.fixture(scope="module")
def engine():
    e = Engine(EngineConfig(model=str(SMALL_MODEL_DIR), threads=1, dtype="float32"))
    yield e
    e.shutdown()


@pytest.fixture
def calls(monkeypatch):
    made: list[tuple[int, int]] = []
    monkeypatch.setattr(mmap_threshold, "mallopt", lambda param, value: made.append((param, value)) or True)
    return made


def raises_and_restores(calls) -> bool:
    pairs = list(zip(calls[::2], calls[1::2]))
    return bool(pairs) and len(calls) % 2 == 0 and all(
        a == (mmap_threshold.M_MMAP_THRESHOLD, mmap_threshold.RAISED) and b == (mmap_threshold.M_MMAP_THRESHOLD, FIXED)
        for a, b in pairs)


def test_a_fill_a_batch_and_a_prepare_encode_with_the_threshold_raised(engine, calls, monkeypatch):
    monkeypatch.setattr(mmap_threshold, "_fixed", FIXED)
    engine.drop_caches()
    engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=4)]))
    assert raises_and_restores(calls), calls
    calls.clear()
    engine.drop_caches()  # several fresh contexts at once: one padded forward
    engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX + "x" * i, suffix=SUFFIX, max_tokens=4) for i in range(3)]))
    assert raises_and_restores(calls), calls
    calls.clear()
    engine.drop_caches()
    assert engine.prepare(PrepareRequest(prefix=PREFIX + "return", suffix=SUFFIX)).complete
    assert raises_and_restores(calls), calls


def test_a_threshold_glibc_still_moves_is_left_alone(engine, calls, monkeypatch):
    monkeypatch.setattr(mmap_threshold, "_fixed", None)  # what every process but the server and daemon has
    engine.drop_caches()
    engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=4)]))
    assert calls == []


def test_next_edits_forwards_run_with_the_threshold_raised(tiny_shifted_model, calls, monkeypatch):
    """A next edit's forwards run its region's rows and their logits: wide blocks, like an
    encoding's (twenty-fourth session: 2x a next edit's latency in the server without)."""
    from dllm_engine.next_edit import NextEditRequest, RecentEdit

    doc = "def area(width, height):\n    return w * height + w\n\n\ndef main():\n    print(area(2, 3))\n"
    at = doc.index("width")
    e = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1, dtype="float32", weights="native"))
    try:
        monkeypatch.setattr(mmap_threshold, "_fixed", FIXED)
        calls.clear()
        e.next_edit(NextEditRequest(document=doc, edits=[RecentEdit(offset=at, removed="w", inserted="width")],
                                    region_start_line=0, region_end_line=6, cursor=at + 5))
        assert raises_and_restores(calls), calls
        assert len(calls) >= 4  # the region's stream took more than one forward, each raised
    finally:
        e.shutdown()


def test_a_scoring_windows_forward_runs_with_the_threshold_raised(engine, calls, monkeypatch):
    """A scoring window's rows and their logits (megabytes) come from the arena, as an encoding's."""
    from dllm_engine.protocol import ScoreRequest

    monkeypatch.setattr(mmap_threshold, "_fixed", FIXED)
    engine.score(ScoreRequest(prefix=PREFIX, span="return os.path.getsize(path)", suffix=SUFFIX))  # context cached
    calls.clear()
    engine.score(ScoreRequest(prefix=PREFIX, span="return os.path.getsize(path)", suffix=SUFFIX))
    assert raises_and_restores(calls), calls
