"""A prompt far over the model's window: refused with a 400 naming the window before it is tokenized,
or trimmed to the text nearest the hole with ?trim_context=true (issue 16, defect 4: a 100 MB prompt
was tokenized whole before the window check)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from dllm_engine.daemon import EngineHost, build_app


@pytest.fixture(scope="module")
def client(default_engine):
    host = EngineHost(lambda: default_engine)
    host.engine = default_engine
    return TestClient(build_app(host, max_body_bytes=64 * 2**20), raise_server_exceptions=False)


@pytest.fixture
def encodes(default_engine, monkeypatch):
    """Characters handed to the tokenizer, counted."""
    seen = []
    real = default_engine.tokenizer.encode
    monkeypatch.setattr(default_engine.tokenizer, "encode", lambda text: seen.append(len(text)) or real(text))
    return seen


def test_a_prompt_past_what_the_window_can_hold_is_refused_untokenized(client, default_engine, encodes):
    window = default_engine.runner.window
    huge = "x = 1\n" * (window * default_engine.tokenizer.longest_token_chars() // 6 + 10)
    for path, body in [("/v1/infill", {"holes": [{"prefix": huge, "max_tokens": 8}]}),
                       ("/v1/completions", {"prompt": "def f():\n", "suffix": huge, "max_tokens": 8})]:
        r = client.post(path, json=body)
        assert r.status_code == 400, r.text
        assert f"window of {window} tokens" in r.json()["error"]["message"] and "trim_context" in r.json()["error"]["message"]
    assert max(encodes, default=0) < 1000  # the huge text never reached the tokenizer


def test_trim_context_keeps_the_text_nearest_the_hole(client, default_engine, encodes):
    window = default_engine.runner.window
    prefix = "".join(f"v{i} = {i}\n" for i in range(window * 3)) + "def last(a):\n    return "
    suffix = "\nprint(last(1))\n" + "z = 0\n" * (window * 2)
    r = client.post("/v1/infill?trim_context=true", json={"holes": [{"prefix": prefix, "suffix": suffix,
                                                                       "max_tokens": 8}]})
    assert r.status_code == 200, r.text
    assert r.json()["context_tokens"] <= window
    assert max(encodes) <= window * default_engine.tokenizer.longest_token_chars()  # cut by characters first
    r = client.post("/v1/completions?trim_context=1", json={"prompt": prefix, "suffix": suffix, "max_tokens": 8})
    assert r.status_code == 200, r.text
