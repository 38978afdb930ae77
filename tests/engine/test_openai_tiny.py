"""The OpenAI surface on a tiny native checkpoint, in process: strict model names, the
window refusal (streamed or not), and the openai SDK through starlette's test client."""

from __future__ import annotations

import openai
import pytest
from starlette.testclient import TestClient

from dllm_engine.daemon import EngineHost, build_app
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.openai_api.models import ServedModels


@pytest.fixture(scope="module")
def engine(tiny_model):
    e = Engine(EngineConfig(model=str(tiny_model), threads=1))
    yield e
    e.shutdown()


def sdk(engine, models: ServedModels, token: str = "t") -> openai.OpenAI:
    host = EngineHost(lambda: engine)
    host.engine = engine
    http = TestClient(build_app(host, token, models=models), raise_server_exceptions=False)
    return openai.OpenAI(base_url="http://testserver/v1", api_key=token, http_client=http, max_retries=0)


def test_strict_names_are_404_and_aliases_are_served(engine):
    client = sdk(engine, ServedModels(aliases=("mercury-edit-2",), strict=True))
    assert [m.id for m in client.models.list().data] == ["model", "mercury-edit-2"]  # the folder's name
    r = client.completions.create(model="mercury-edit-2", prompt="x = ", max_tokens=4)
    assert r.model == "mercury-edit-2"
    with pytest.raises(openai.NotFoundError) as err:
        client.completions.create(model="gpt-3.5-turbo-instruct", prompt="x = ", max_tokens=4)
    assert err.value.body["code"] == "model_not_found" and err.value.body["param"] == "model"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")


def test_a_prompt_over_the_window_is_400_naming_it(engine):
    client = sdk(engine, ServedModels())
    for stream in (False, True):  # refused before a stream starts, so still a 400
        with pytest.raises(openai.BadRequestError, match="window"):
            client.completions.create(model="m", prompt="x = 1\n" * 3000, stream=stream)


def test_fim_route_and_stream_on_the_tiny_model(engine):
    client = sdk(engine, ServedModels())
    whole = client.post("/fim/completions", cast_to=object,
                        body={"model": "mercury-edit-2", "prompt": "a", "suffix": "b", "max_tokens": 40})
    chunks = [c.choices[0].text for c in client.completions.create(model="m", prompt="a", suffix="b",
                                                                  max_tokens=40, stream=True)]
    assert "".join(chunks) == whole["choices"][0]["text"]
    assert whole["object"] == "text_completion" and whole["model"] == "mercury-edit-2"
