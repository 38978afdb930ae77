"""The official `openai` SDK against a daemon serving the default model as shipped (issue 13:
"against the real default model"): the FIM stream a client such as Continue or minuet reads
joins to the non-streamed text, arrives in several chunks, and ends truthfully.
tests/engine/test_openai_sdk.py covers the API surface on the small model."""

from __future__ import annotations

import sys
from pathlib import Path

import openai
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from tcp_daemon import tcp_daemon  # noqa: E402

TOKEN = "s3cret-token"
PROMPT = "import os\n\n\ndef read_lines(path):\n    \"\"\"Return the lines of a text file.\"\"\"\n    with open(path) as f:\n        "
SUFFIX = "\n\n\ndef count_lines(path):\n    return len(read_lines(path))\n"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("sdk-default") / "daemon.log"
    # wait_s: a fresh clone builds the default model's weight cache first
    with tcp_daemon(["--model", "default"], TOKEN, log_path, wait_s=180) as base:
        yield openai.OpenAI(base_url=base + "/v1", api_key=TOKEN, max_retries=0)


def test_the_default_model_is_listed(client):
    assert [m.id for m in client.models.list().data] == ["dllm-lsp-default"]


def test_a_streamed_fill_of_the_default_model_joins_to_the_plain_one(client):
    kw = dict(model="mercury-2", prompt=PROMPT, suffix=SUFFIX, max_tokens=32, temperature=0)
    plain = client.completions.create(**kw)
    chunks, reasons = [], []
    for event in client.completions.create(stream=True, **kw):
        for choice in event.choices:
            if choice.text:
                chunks.append(choice.text)
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    text = plain.choices[0].text
    assert text.strip(), text  # the base writes code here, not nothing
    assert "".join(chunks) == text
    assert reasons == [plain.choices[0].finish_reason] and reasons[0] in ("stop", "length")
    if plain.usage.completion_tokens >= 8:
        assert len(chunks) >= 2  # settled text arrives as the denoiser commits it, not at the end
    assert plain.usage.prompt_tokens > 0 and plain.usage.completion_tokens > 0


def test_best_of_through_the_sdk_is_one_choice_and_refused_with_a_stream(client):
    kw = dict(model="mercury-2", prompt=PROMPT, suffix=SUFFIX, max_tokens=16, stop=["\n"])
    best = client.completions.create(best_of=2, **kw)
    assert len(best.choices) == 1 and best.choices[0].finish_reason in ("stop", "length")
    assert best.usage.completion_tokens >= 0
    with pytest.raises(openai.BadRequestError, match="best_of"):
        client.completions.create(best_of=2, stream=True, **kw)
    with pytest.raises(openai.BadRequestError, match="best_of"):
        client.completions.create(best_of=3, n=2, **kw)
