"""The daemon as an OpenAI server, driven by the official `openai` Python SDK (issue 13).

One real daemon on TCP with a token, serving the real small model (DLLM_LSP_MODEL=small):
what an editor plugin or a script sees when it changes only its base URL.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import httpx
import openai
import pytest
from tcp_daemon import tcp_daemon  # noqa: E402

TOKEN = "s3cret-token"
PROMPT = "def fibonacci(n):\n    "
SUFFIX = "\n\nprint(fibonacci(10))\n"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("sdk") / "daemon.log"
    with tcp_daemon(["--served-model-name", "mercury-edit-2"], TOKEN, log_path) as base:
        yield base


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key=TOKEN, max_retries=0)


def streamed(client, **kw) -> tuple[dict[int, list[str]], dict[int, str]]:
    """The text chunks and the finish reason of every choice of a streamed completion."""
    chunks: dict[int, list[str]] = {}
    reasons: dict[int, str] = {}
    for event in client.completions.create(stream=True, **kw):
        for choice in event.choices:
            if choice.text:
                chunks.setdefault(choice.index, []).append(choice.text)
            if choice.finish_reason:
                reasons[choice.index] = choice.finish_reason
    return chunks, reasons


def test_models_list_and_any_name(client):
    listed = client.models.list()
    ids = [m.id for m in listed.data]
    assert ids == ["dllm-lsp-small", "mercury-edit-2"]
    extras = listed.data[0].model_extra["dllm_lsp"]
    assert extras["family"] == "native" and extras["context_window"] > 0 and extras["mask_token_id"] >= 0
    # Not strict: a name the client brought is served by the one model, and echoed.
    assert client.models.retrieve("gpt-3.5-turbo-instruct").id == "gpt-3.5-turbo-instruct"
    # Inception's card fields, as Kilo Code's Inception provider parses them (its zod schema,
    # src/api/providers/fetchers/inception.ts): without `pricing` its model list throws.
    card = listed.data[0].model_extra
    kilo = {"name": str, "input_modalities": list, "output_modalities": list, "context_length": int,
            "max_output_length": int, "pricing": dict, "suported_sampling_parameters": list,
            "supported_features": list, "supports_prefix_caching": bool}
    assert {k: type(card[k]) for k in kilo} == kilo and listed.data[0].created > 0
    assert set(card["pricing"]) == {"prompt", "completion", "image", "request", "input_cache_reads",
                                    "input_cache_writes"} and card["context_length"] == extras["context_window"]


def test_fim_completion(client):
    r = client.completions.create(model="mercury-edit-2", prompt=PROMPT, suffix=SUFFIX, max_tokens=24)
    assert r.model == "mercury-edit-2" and r.object == "text_completion"
    [choice] = r.choices
    assert choice.finish_reason in ("stop", "length") and isinstance(choice.text, str)
    assert 0 < r.usage.completion_tokens <= 24
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # No max_tokens: OpenAI's default of 16.
    r = client.completions.create(model="gpt-3.5-turbo-instruct", prompt=PROMPT, suffix=SUFFIX)
    assert r.usage.completion_tokens <= 16


def test_a_stream_joins_to_the_same_fill(client):
    """Greedy and sampled: the chunks of each fill join to exactly the non-streamed text."""
    for kw in ({"temperature": 0}, {"temperature": 0.8, "seed": 1}):
        whole = client.completions.create(model="m", prompt=PROMPT, suffix=SUFFIX, max_tokens=48, **kw)
        chunks, reasons = streamed(client, model="m", prompt=PROMPT, suffix=SUFFIX, max_tokens=48, **kw)
        assert "".join(chunks[0]) == whole.choices[0].text
        assert reasons[0] == whole.choices[0].finish_reason
        if whole.usage.completion_tokens >= 32:  # the bar: a fill of 32+ tokens arrives in 2+ chunks
            assert len(chunks[0]) >= 2, chunks


def test_a_long_fill_streams_in_several_chunks(client):
    """48 greedy tokens of this prompt: the small model uses them all (finish_reason length)."""
    whole = client.completions.create(model="m", prompt=PROMPT, suffix=SUFFIX, max_tokens=48)
    assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 48
    chunks, _ = streamed(client, model="m", prompt=PROMPT, suffix=SUFFIX, max_tokens=48)
    assert len(chunks[0]) >= 2


def test_n_fills_are_seeded_and_batched(client):
    kw = dict(model="m", prompt=PROMPT, max_tokens=32, temperature=0.8, seed=7, n=3)
    r = client.completions.create(**kw)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert len({c.text for c in r.choices}) > 1  # independent fills
    assert [c.text for c in client.completions.create(**kw).choices] == [c.text for c in r.choices]  # seeded
    chunks, reasons = streamed(client, **kw)
    assert ["".join(chunks.get(i, [])) for i in range(3)] == [c.text for c in r.choices]
    assert [reasons[i] for i in range(3)] == [c.finish_reason for c in r.choices]
    # A list prompt: each element its own fill, n of each, in OpenAI's order.
    r = client.completions.create(model="m", prompt=["x = ", "def f():\n    return "], max_tokens=8, n=2)
    assert len(r.choices) == 4 and r.choices[0].text == r.choices[1].text  # greedy: n copies alike


def test_stop_strings(client):
    for stop in ("\n", ["\n\n", "return"]):
        whole = client.completions.create(model="m", prompt=PROMPT, max_tokens=48, stop=stop)
        stops = [stop] if isinstance(stop, str) else stop
        assert not any(s in whole.choices[0].text for s in stops)
        chunks, _ = streamed(client, model="m", prompt=PROMPT, max_tokens=48, stop=stop)
        assert "".join(chunks.get(0, [])) == whole.choices[0].text


def test_usage_in_a_stream_when_asked(client):
    events = list(client.completions.create(model="m", prompt=PROMPT, max_tokens=16, stream=True,
                                            stream_options={"include_usage": True}))
    assert events[-1].choices == [] and 0 < events[-1].usage.completion_tokens <= 16


def test_errors_surface_through_the_sdk(client, base_url):
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model="m", prompt="x", max_tokens=0)
    assert "max_tokens" in bad.value.message and bad.value.body["param"] == "max_tokens"
    with pytest.raises(openai.BadRequestError, match="echo"):
        client.completions.create(model="m", prompt="x", echo=True)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=base_url + "/v1", api_key="wrong", max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError, match="no route"):
        client.post("/nope", cast_to=object)


def test_a_client_that_leaves_mid_stream_cancels_the_request(base_url):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as c:
        before = c.get("/metrics").json()["requests_cancelled"]
        body = {"prompt": PROMPT, "max_tokens": 1024, "stream": True}
        with c.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200
            first = next(line for line in r.iter_lines() if line.startswith("data:"))
            assert '"text_completion"' in first
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = c.get("/metrics").json()
            if m["requests_cancelled"] > before and m["active_canvases"] == 0:
                break
            time.sleep(0.1)
        assert m["requests_cancelled"] == before + 1 and m["active_canvases"] == 0


NODE_CLIENT = Path(__file__).parent / "openai_node"


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm not installed")
def test_the_openai_npm_package_streams_fim(base_url):
    """The official `openai` npm package (pinned in openai_node/package-lock.json), driven by node."""
    if not (NODE_CLIENT / "node_modules" / "openai").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_CLIENT, check=True, capture_output=True,
                       timeout=300)
    out = subprocess.run(["node", "fim_stream.mjs"], cwd=NODE_CLIENT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DAEMON_URL": base_url + "/v1", "DAEMON_TOKEN": TOKEN})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["models"] == ["dllm-lsp-small", "mercury-edit-2"]
    assert "".join(got["chunks"]) == got["text"] and len(got["chunks"]) >= 2 and got["tokens"] >= 32
    assert got["error"]["name"] == "BadRequestError" and got["error"]["param"] == "max_tokens"


def test_litellm_text_completion_and_its_inception_route(base_url, monkeypatch):
    """LiteLLM's OpenAI text-completion route, and the Inception FIM route it ships (which
    posts to <api_base>/fim/completions), pointed at the daemon."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no cost map download
    litellm = pytest.importorskip("litellm")
    kw = dict(api_base=base_url + "/v1", api_key=TOKEN, prompt=PROMPT, max_tokens=16)
    r = litellm.text_completion(model="text-completion-openai/gpt-3.5-turbo-instruct", **kw)
    assert isinstance(r.choices[0].text, str) and r.usage.completion_tokens <= 16
    r = litellm.text_completion(model="text-completion-inception/mercury-edit-2", suffix=SUFFIX, **kw)
    assert isinstance(r.choices[0].text, str) and 0 < r.usage.completion_tokens <= 16
    with pytest.raises(litellm.exceptions.BadRequestError, match="max_tokens"):
        litellm.text_completion(model="text-completion-inception/mercury-edit-2", **{**kw, "max_tokens": -3})
