"""A new place's first answers read the near part of its context (near_context.py, Hole.near_tokens):
the engine encodes only the suffix's start and the prefix's end while more of the whole context
is uncached, then the whole a chunk at a time once no request has come for a moment, and the
next request there reads the whole, filling as a cold engine does. Real models: the small
from-scratch one and a tiny shifted-logit one (the default model's decoding)."""

from __future__ import annotations

import contextlib
import time
from types import SimpleNamespace

import pytest
import torch

from dllm_engine.http_schemas import InfillBody, parse_body
from dllm_engine.near_context import QUIET_S, CatchUp, near_ids
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest, ProtocolError
from dllm_engine.runner import trim_to_trained

PREFIX = ("import json\nimport os\n\n\ndef config_dir():\n    \"\"\"Where the settings live.\"\"\"\n"
          "    home = os.environ.get(\"HOME\", \".\")\n    return os.path.join(home, \".config\", \"app\")\n\n\n"
          "def config_path(name):\n    return os.path.join(config_dir(), name + \".json\")\n\n\n"
          "def load_config(path):\n    \"\"\"Read the settings file.\"\"\"\n"
          "    with open(path, encoding=\"utf-8\") as f:\n        data = json.load(f)\n"
          "    if not isinstance(data, dict):\n        raise ValueError(path)\n    ")
SUFFIX = "\n    return data\n\n\ndef save_config(path, config):\n    with open(path, \"w\") as f:\n        json.dump(config, f)\n"
NEAR = 64


def hole(near: int | None = NEAR, **kw) -> Hole:
    return Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=12, stop=("\n",), near_tokens=near, **kw)


@pytest.fixture(scope="module")
def engine(small_or_shifted_engine):
    return small_or_shifted_engine


def whole_ids(engine):
    prefix_ids, suffix_ids, *_ = engine._tokenize(hole())
    return engine.runner.cache_ids(prefix_ids, suffix_ids), prefix_ids, suffix_ids


def cached(engine, ids) -> int:
    return engine.between_passes(lambda: engine.runner.cache.lookup(ids, count=False, full=True)[2])


def test_a_cold_place_is_read_near_then_whole_once_the_engine_caught_up(engine):
    engine.drop_caches()
    cold_whole = engine.infill(InfillRequest(holes=[hole(near=None)]))
    assert cold_whole.near_holes == 0
    engine.drop_caches()
    ids, prefix_ids, suffix_ids = engine.between_passes(lambda: whole_ids(engine))
    assert ids.numel() > 2 * NEAR
    first = engine.infill(InfillRequest(holes=[hole()]))
    assert first.near_holes == 1
    assert first.context_tokens <= NEAR + 4 < ids.numel()
    # What it read is the near part: the suffix's start and the prefix's end, `NEAR` tokens.
    near_prefix, near_suffix = trim_to_trained(prefix_ids, suffix_ids, NEAR)
    near = engine.between_passes(lambda: engine.runner.cache_ids(near_prefix, near_suffix))
    assert cached(engine, near) == near.numel()
    # Idle: the engine encodes the whole context behind it, a chunk at a time.
    deadline = time.monotonic() + 30
    while cached(engine, ids) < ids.numel() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cached(engine, ids) == ids.numel()
    second = engine.infill(InfillRequest(holes=[hole()]))
    assert second.near_holes == 0 and second.context_tokens - second.cached_tokens <= 1
    assert second.holes[0].text == cold_whole.holes[0].text


@pytest.mark.parametrize("asked", [
    dict(near=None),  # not asked for
    dict(priority="batch"),  # a prefetch or a refactor: nobody waits on it
    dict(candidates=2),  # best of N reads its fills against the whole context anyway
])
def test_the_whole_context_is_read_where_the_near_part_was_not_asked_for_or_would_not_help(engine, asked):
    engine.drop_caches()
    request = InfillRequest(holes=[hole(near=asked.get("near", NEAR))], priority=asked.get("priority", "interactive"),
                            params=DiffusionParams(candidates=asked.get("candidates", 1)))
    result = engine.infill(request)
    if "candidates" in asked and not engine.scores_candidates:  # such a model fills once: nothing reads it again
        assert result.near_holes == 1
        return
    assert result.near_holes == 0
    ids, *_ = engine.between_passes(lambda: whole_ids(engine))
    assert result.context_tokens >= ids.numel()


@pytest.mark.parametrize("length", ["chosen", "fixed"])
def test_a_fill_whose_end_is_chosen_reads_the_whole_and_a_fixed_length_reads_near(engine, length):
    """The end is chosen by reading the fill's cuts against the whole context (fill_end.py), so a
    multi-line fill reads it whole at once; a fill whose length the caller fixed has no end to
    choose, and reads near like a single line."""
    engine.drop_caches()
    bucket = 12 if length == "fixed" else None
    result = engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=12, bucket=bucket,
                                                     near_tokens=NEAR)]))
    assert result.near_holes == (0 if length == "chosen" and engine.scores_candidates else 1)


def test_a_place_whose_whole_context_is_cached_reads_the_whole(engine):
    engine.drop_caches()
    engine.infill(InfillRequest(holes=[hole(near=None)]))
    again = engine.infill(InfillRequest(holes=[hole()]))
    assert again.near_holes == 0


def test_near_reading_chooses_the_part_with_less_to_encode():
    runner = SimpleNamespace(cache_ids=lambda p, s: torch.tensor([0, *s, 1, *p]))
    stored: list = []
    runner.cache = SimpleNamespace(lookup=lambda ids, count, full: (None, None, max(
        (min(len(e), len(ids)) if list(e[:len(ids)]) == list(ids[:len(e)]) else 0 for e in stored), default=0)))
    prefix, suffix = list(range(100, 400)), list(range(500, 600))
    p, s, whole = near_ids(runner, prefix, suffix, 64)
    assert whole is not None and len(p) + len(s) <= 64 and s == suffix[:16] and p == prefix[-len(p):]
    stored.append(whole.tolist())  # the whole is cached now: read it
    assert near_ids(runner, prefix, suffix, 64)[2] is None
    assert near_ids(runner, prefix[:40], suffix[:10], 64)[2] is None  # the whole is no longer than the near part


def test_the_catch_up_waits_for_a_pause_in_requests():
    encoded = []
    runner = SimpleNamespace(encode_tokens=lambda ids: encoded.append(ids.numel()),
                             cache=SimpleNamespace(lookup=lambda ids, count, full: (None, None, encoded[-1] if encoded else 0)))
    catch_up = CatchUp(runner, chunk=10, quiet_s=0.2)
    catch_up.want(torch.arange(25))
    catch_up.heard()
    assert catch_up.pending() and not catch_up.due() and 0 < catch_up.wait_s(1.0) <= 0.21
    time.sleep(0.21)
    assert catch_up.due()
    assert [catch_up.step() for _ in range(4)] == [10, 10, 5, 0] and encoded == [10, 20, 25]
    assert not catch_up.pending() and catch_up.wait_s(1.0) == 1.0


@pytest.mark.parametrize("value", [0, 63, 65537, 100.5, True, "384"])
def test_a_bad_near_tokens_is_refused_at_both_boundaries(value):
    with pytest.raises(ProtocolError, match="near_tokens"):
        Hole(prefix="x", near_tokens=value).validate()
    body = ('{"holes": [{"prefix": "x", "near_tokens": %s}]}' % (f'"{value}"' if isinstance(value, str)
                                                                  else str(value).lower())).encode()
    with pytest.raises(ProtocolError, match="near_tokens"):
        parse_body(InfillBody, body)


def test_a_context_too_long_for_the_model_fails_its_own_request_alone(engine):
    long_hole = Hole(prefix="x = 1\n" * 20000, suffix=SUFFIX, max_tokens=12, stop=("\n",), near_tokens=NEAR)
    try:
        result = engine.infill(InfillRequest(holes=[long_hole]), timeout=60)
        assert result.holes[0].finish_reason  # a model trained on short contexts trims it instead
    except ProtocolError as exc:
        assert "window" in str(exc)
    assert engine.infill(InfillRequest(holes=[hole()]), timeout=60).holes[0].finish_reason


@contextlib.contextmanager
def catch_up_held(engine):
    """A near read at this test's place with its catch-up kept pending (no pause long enough)."""
    engine.drop_caches()
    engine._catch_up._quiet_s = 60.0
    try:
        assert engine.infill(InfillRequest(holes=[hole()])).near_holes == 1
        assert engine._catch_up.pending()
        yield
    finally:
        engine._catch_up._quiet_s = QUIET_S


def test_dropping_the_caches_forgets_a_pending_catch_up(engine):
    with catch_up_held(engine):
        engine.drop_caches()
        assert not engine._catch_up.pending()


def test_a_place_read_whole_forgets_the_catch_up_of_a_place_left(engine):
    with catch_up_held(engine):
        # The user goes on in a short file: its whole context is no more than the near part.
        short = Hole(prefix="def f(x):\n    return ", suffix="\n", max_tokens=8, stop=("\n",), near_tokens=NEAR)
        assert engine.infill(InfillRequest(holes=[short])).near_holes == 0
        assert not engine._catch_up.pending()


def test_a_typist_crossing_the_prefix_grid_keeps_the_cached_near_part():
    stored: list = []
    runner = SimpleNamespace(cache_ids=lambda p, s: torch.tensor([0, *s, 1, *p]))
    runner.cache = SimpleNamespace(lookup=lambda ids, count, full: (None, None, max(
        (next((i for i, (a, b) in enumerate(zip(e, ids.tolist())) if a != b), min(len(e), len(ids)))
         for e in stored), default=0)))
    suffix = list(range(5000, 5300))
    prefix = list(range(10000, 11022))  # the near prefix room is 192: its start 830 rounds up to 832
    p, s, whole = near_ids(runner, prefix, suffix, 256)
    assert whole is not None and len(p) == 1022 - 832
    stored.append(runner.cache_ids(p, s).tolist())  # the first keystroke's near part, encoded
    typed = prefix + list(range(20000, 20010))  # 10 tokens more: the in-budget window now starts at 864
    fresh_p, _ = trim_to_trained(typed, suffix, 256)
    assert len(typed) - len(fresh_p) == 864
    p2, s2, _ = near_ids(runner, typed, suffix, 256)
    assert p2 == typed[832:] and s2 == s  # the cached window, extended: 10 tokens to encode, not 168
