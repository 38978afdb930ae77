"""Preparing a place's context (prepare.py): the cursor rests, the engine encodes the context a
request there will carry, in chunks, and the request then finds it cached and fills exactly as
a cold engine does. Real models: the small from-scratch one and a tiny shifted-logit one (the
default model's decoding, with its held-out last context token)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import httpx
import pytest
import torch

from dllm_engine.clients import DaemonClient
from dllm_engine.http_schemas import PrepareBody, parse_body
from dllm_engine.prepare import PrepareRequest, PrepareResult, _encode_unless_busy, context_ids, prepare_context
from dllm_engine.protocol import Hole, InfillRequest, ProtocolError

PREFIX = ("import json\n\n\ndef load_config(path):\n    \"\"\"Read the settings file.\"\"\"\n"
          "    with open(path, encoding=\"utf-8\") as f:\n        data = json.load(f)\n"
          "    if not isinstance(data, dict):\n        raise ValueError(path)\n    ")
SUFFIX = "\n    return data\n\n\ndef save_config(path, config):\n    with open(path, \"w\") as f:\n        json.dump(config, f)\n"


def hole(prefix: str = PREFIX) -> Hole:
    return Hole(prefix=prefix, suffix=SUFFIX, max_tokens=12, stop=("\n",))


@pytest.fixture(scope="module")
def engine(small_or_shifted_engine):
    return small_or_shifted_engine


def test_a_prepared_place_is_answered_from_the_cache_with_the_cold_fill(engine):
    engine.drop_caches()
    cold = engine.infill(InfillRequest(holes=[hole(PREFIX + "data")]))
    assert cold.cached_tokens < 8  # nothing but the first marker was cached
    engine.drop_caches()
    prepared = engine.prepare(PrepareRequest(prefix=PREFIX, suffix=SUFFIX))
    assert prepared.complete and prepared.cached_tokens < 8
    assert prepared.encoded_tokens == prepared.context_tokens - prepared.cached_tokens > 100
    # The user types a word there: all but the retokenized end of the prefix is cached.
    warm = engine.infill(InfillRequest(holes=[hole(PREFIX + "data")]))
    assert warm.context_tokens - warm.cached_tokens <= 3, (warm.context_tokens, warm.cached_tokens)
    assert warm.holes[0].text == cold.holes[0].text
    # Prepared again: nothing to encode.
    again = engine.prepare(PrepareRequest(prefix=PREFIX, suffix=SUFFIX))
    assert again.complete and again.encoded_tokens == 0 and again.cached_tokens == again.context_tokens


def test_chunked_encoding_gives_the_one_forward_k_v(engine):
    engine.drop_caches()
    request = PrepareRequest(prefix=PREFIX, suffix=SUFFIX)
    result = prepare_context(engine, request, chunk=16)
    assert result.complete and result.encoded_tokens > 5 * 16
    ids = engine.between_passes(lambda: context_ids(engine, request))
    _, entry, reuse = engine.runner.cache.lookup(ids, count=False, full=True)
    assert reuse == ids.numel()
    chunked = entry.buf[:, :, :, :reuse].clone()
    engine.drop_caches()
    whole = engine.between_passes(lambda: engine.runner.encode_tokens(ids)).kv
    torch.testing.assert_close(chunked, whole, atol=1e-4, rtol=1e-4)


def test_a_cancelled_prepare_stops_before_its_next_chunk(engine):
    engine.drop_caches()
    cancel = threading.Event()
    cancel.set()
    result = engine.prepare(PrepareRequest(prefix=PREFIX, suffix=SUFFIX), cancel)
    assert not result.complete and result.encoded_tokens == 0


def test_a_request_waiting_or_running_goes_before_the_next_chunk():
    encoded = []
    runner = SimpleNamespace(encode_tokens=encoded.append)
    for active, queued in (([object()], 0), ([], 1)):
        busy = SimpleNamespace(scheduler=SimpleNamespace(active=active, queue_depth=queued), runner=runner)
        assert _encode_unless_busy(busy, "ids") is False
    idle = SimpleNamespace(scheduler=SimpleNamespace(active=[], queue_depth=0), runner=runner)
    assert _encode_unless_busy(idle, "ids") is True and encoded == ["ids"]


def test_a_model_without_an_exact_context_cache_has_nothing_to_prepare():
    family = SimpleNamespace(runner=SimpleNamespace(cache=None))  # a family runner: no encode_tokens
    result = prepare_context(family, PrepareRequest(prefix="x = ", suffix=""))
    assert (result.context_tokens, result.encoded_tokens, result.complete) == (0, 0, False)


@pytest.mark.parametrize("body, field", [
    (b'{"prefix": 3}', "prefix"),
    (b'{"suffix": "x"}', "prefix"),
    (b'{"prefix": "a", "holes": []}', "holes"),
    (b'{"prefix": "a", "request_id": ""}', "request_id"),
    (b'{"prefix": "\\ud800"}', "prefix"),
])
def test_a_bad_prepare_body_is_refused_naming_its_field(body, field):
    with pytest.raises(ProtocolError, match=field):
        parse_body(PrepareBody, body)


def test_a_prepare_request_checks_its_own_fields():
    with pytest.raises(ProtocolError):
        PrepareRequest(prefix=None).validate()  # type: ignore[arg-type]
    with pytest.raises(ProtocolError):
        PrepareRequest.from_dict(["not", "an", "object"])
    assert PrepareRequest.from_dict({"prefix": "a", "suffix": "b"}).suffix == "b"
    result = PrepareResult("r", 10, 2, 8, True, 1.5)
    assert PrepareResult.from_dict(result.to_dict()) == result


async def test_an_older_daemon_without_the_route_says_it_cannot_prepare():
    def older(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": {"message": "Not Found", "code": "unknown_url"}})

    client = DaemonClient(url="http://old-daemon")
    client._http = httpx.AsyncClient(base_url="http://old-daemon", transport=httpx.MockTransport(older))
    with pytest.raises(NotImplementedError, match="/v1/prepare"):
        await client.prepare(PrepareRequest(prefix="x = "))
    await client.close()
