"""/v1/chat/completions on tiny checkpoints in their families' exact formats, through the openai SDK."""

from __future__ import annotations

import json

import openai
import pytest
from ckpt_writers import write_checkpoint
from starlette.testclient import TestClient

from dllm_engine.daemon import EngineHost, build_app
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.openai_api.chat_template import find_chat_template, render_chat
from dllm_engine.protocol import MASK_GLYPH

# LLaDA-8B-Instruct's template shape (Llama 3 headers, <|eot_id|> ends a turn).
LLADA_TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
                  "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
                  " + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
                  "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
                  "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")


def _engine(folder):
    return Engine(EngineConfig(model=str(folder), threads=1, device="cpu", dtype="float32"))


@pytest.fixture(scope="module")
def instruct(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llada") / "LLaDA-8B-Instruct-tiny"
    write_checkpoint(folder, "llada")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "bos_token": "<|endoftext|>",
                                                              "chat_template": LLADA_TEMPLATE}))
    e = _engine(folder)
    yield e
    e.shutdown()


def sdk(engine) -> openai.OpenAI:
    host = EngineHost(lambda: engine)
    host.engine = engine
    http = TestClient(build_app(host, "t"), raise_server_exceptions=False)
    return openai.OpenAI(base_url="http://testserver/v1", api_key="t", http_client=http, max_retries=0)


def test_the_template_renders_as_transformers_does(instruct):
    template = find_chat_template(instruct.loaded.path)
    prompt = render_chat(instruct.loaded.path, template, [{"role": "user", "content": " hi "}])
    assert prompt == ("<|endoftext|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                      "<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_chat_completion_streamed_and_not(instruct):
    client = sdk(instruct)
    messages = [{"role": "system", "content": "w1 w2"}, {"role": "user", "content": "w3 w4 w5"}]
    r = client.chat.completions.create(model="mercury-2", messages=messages, max_tokens=24)
    assert r.object == "chat.completion" and r.model == "mercury-2"
    assert r.choices[0].message.role == "assistant" and r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 24
    deltas, reasons = [], []
    for chunk in client.chat.completions.create(model="mercury-2", messages=messages, max_tokens=24, stream=True):
        assert chunk.object == "chat.completion.chunk"
        deltas.append(chunk.choices[0].delta.content or "")
        reasons.append(chunk.choices[0].finish_reason)
    assert "".join(deltas) == r.choices[0].message.content
    assert reasons[-1] == r.choices[0].finish_reason


def test_diffusing_streams_whole_canvases(instruct):
    client = sdk(instruct)
    messages = [{"role": "user", "content": "w3 w4 w5"}]
    final = client.chat.completions.create(model="m", messages=messages, max_tokens=16, temperature=0)
    contents = [c.choices[0].delta.content for c in client.chat.completions.create(
        model="m", messages=messages, max_tokens=16, stream=True, extra_body={"diffusing": True})]
    canvases = [c for c in contents[1:-1] if c]
    assert canvases and any(MASK_GLYPH in c for c in canvases)  # intermediate canvases, masks showing
    assert contents[-1] == final.choices[0].message.content or (contents[-1] is None
                                                               and final.choices[0].message.content == "")


def test_refusals_name_the_reason(instruct, tmp_path):
    client = sdk(instruct)
    with pytest.raises(openai.BadRequestError, match="tool calls"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                       tools=[{"type": "function", "function": {"name": "f"}}])
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="m", messages=[])
    base = tmp_path / "dream-base"
    write_checkpoint(base, "dream")
    e = _engine(base)
    try:
        with pytest.raises(openai.BadRequestError, match="no chat template"):
            sdk(e).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    finally:
        e.shutdown()
