"""Fuzzed daemon bodies against the real default model: 4xx for every invalid body, never a 5xx,
and the engine still serving a good request afterwards (issue 16, the systematic part).

Bodies are drawn near the valid shape (right keys, wrong values: bools, floats, huge
ints, lone surrogates, lists where strings belong, extra keys), so most reach the
deep checks. A body the schema accepts goes to the real engine, which must answer
it (200) or refuse it as a client error (400, e.g. a context past the window).
Fixed seed (derandomize), a few seconds in all.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from dllm_engine.daemon import EngineHost, build_app

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 20), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["", "x", "\ud800", "\n", "max_prob"]),
)
TEXT = st.one_of(st.text(max_size=40), st.sampled_from(["x = \ud800", "\udc00", "def f():\n    "]), SCALARS)
VALUE = st.recursive(SCALARS | TEXT, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)


def maybe(key: str, valid: st.SearchStrategy, invalid: st.SearchStrategy = SCALARS,
          absent: bool = True) -> st.SearchStrategy:
    """Valid (most often), invalid, or absent: each field is wrong about one time in ten,
    so that a good share of the bodies are valid throughout and reach the engine."""
    branches = {"valid": valid.map(lambda v: {key: v}), "invalid": invalid.map(lambda v: {key: v}),
                "absent": st.just({})}
    kinds = ["valid"] * 8 + ["invalid"] + (["absent"] if absent else [])
    return st.sampled_from(kinds).flatmap(branches.__getitem__)


def rarely(key: str) -> st.SearchStrategy:
    return st.sampled_from([{}] * 15 + [{key: 1}])


def merged(*parts: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(*parts).map(lambda ds: {k: v for d in ds for k, v in d.items()})


WORDS = st.text(st.characters(codec="utf-8"), max_size=40)
STOPS = st.lists(st.text(st.characters(codec="utf-8"), min_size=1, max_size=3), max_size=2)
HOLE = merged(maybe("prefix", WORDS, TEXT, absent=False), maybe("suffix", WORDS, TEXT),
              maybe("max_tokens", st.integers(1, 8)), maybe("bucket", st.none() | st.integers(1, 4)),
              maybe("stop", STOPS, VALUE), rarely("colour"))
PARAMS = merged(maybe("threshold", st.floats(0.1, 2.0)), maybe("confidence", st.sampled_from(["max_prob", "margin"])),
                maybe("temperature", st.floats(0.0, 2.0)), maybe("seed", st.integers(0, 2**32 - 1)),
                maybe("canvas_cache", st.sampled_from(["exact", "delayed"])))
INFILL = merged(maybe("holes", st.lists(HOLE, min_size=1, max_size=3), VALUE, absent=False), maybe("params", PARAMS, VALUE),
                maybe("priority", st.sampled_from(["interactive", "batch"])), maybe("deadline_s", st.floats(0.5, 60)),
                maybe("stream", st.just(False)))
COMPLETION = merged(maybe("prompt", WORDS | st.lists(WORDS, min_size=1, max_size=1), TEXT, absent=False),
                    maybe("suffix", WORDS | st.none(), TEXT), maybe("max_tokens", st.integers(1, 8) | st.none()),
                    maybe("temperature", st.floats(0.0, 2.0) | st.none()), maybe("stop", STOPS | WORDS, VALUE),
                    maybe("n", st.just(1)), maybe("stream", st.just(False)), maybe("model", st.text(max_size=5)))
SCORE = merged(maybe("prefix", WORDS, TEXT, absent=False), maybe("span", WORDS, TEXT, absent=False), maybe("suffix", WORDS, TEXT),
               maybe("stride", st.integers(1, 16)))
FUZZ = settings(max_examples=80, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def client(default_engine):
    host = EngineHost(lambda: default_engine)
    host.engine = default_engine
    return TestClient(build_app(host), raise_server_exceptions=False)


def small(body: dict) -> dict:
    """Valid fills stay short so the real engine answers quickly: max_tokens capped at 8."""
    for hole in body.get("holes", []) if isinstance(body.get("holes"), list) else []:
        if isinstance(hole, dict) and isinstance(hole.get("max_tokens"), int) and hole["max_tokens"] > 8:
            hole["max_tokens"] = 8
    if isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 8:
        body["max_tokens"] = 8
    if isinstance(body.get("params"), dict):
        body["params"].pop("max_passes", None)
    return body


def post(client: TestClient, path: str, body) -> int:
    raw = json.dumps(body)  # escapes lone surrogates, as JSON allows
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code < 500, (path, raw[:300], r.text[:300])
    assert "error" in r.json() if r.status_code >= 400 else True
    event(f"{path} {r.status_code}")
    return r.status_code


@FUZZ
@given(INFILL)
def test_fuzzed_infill_bodies(client, body):
    assert post(client, "/v1/infill", small(body)) in (200, 400)


@FUZZ
@given(COMPLETION)
def test_fuzzed_completion_bodies(client, body):
    assert post(client, "/v1/completions", small(body)) in (200, 400)


@FUZZ
@given(SCORE)
def test_fuzzed_score_bodies(client, body):
    assert post(client, "/v1/score", body) in (200, 400)


def test_the_engine_still_serves_afterwards(client, default_engine):
    r = client.post("/v1/infill", json={"holes": [{"prefix": "def f(x):\n    return ", "max_tokens": 8}]})
    assert r.status_code == 200 and r.json()["holes"][0]["passes"] >= 1
    assert not default_engine.scheduler.active and default_engine.scheduler.queue_depth == 0
