"""The OpenAI-compatible request bodies (/v1/completions, /v1/fim/completions, /v1/chat/completions).

Strict like the native bodies (http_schemas.py: JSON `2.0` is not an integer), but
unknown fields are ignored rather than refused: OpenAI clients send many we have
no use for (`user`, `presence_penalty`, `metadata`...), and "change only the base
URL" must hold. `null` means the default, as OpenAI's API reads it. What we cannot
honour and a client would rely on (`echo`, `logprobs`, `best_of` with `n` > 1) is refused
with a 400 naming it, never silently dropped.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..http_schemas import Seed, StopText, Text
from ..protocol import MAX_CANDIDATES

# OpenAI's own default when a completions body has no max_tokens.
OPENAI_DEFAULT_MAX_TOKENS = 16
MAX_FILL_TOKENS = 1024  # the engine's cap per hole
MAX_CHOICES = 16  # n per prompt; n x prompts is at most the engine's 256 holes
MAX_PROMPTS = 16

Stop = StopText | Annotated[list[StopText], Field(max_length=8)] | None


class _OpenAIBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class StreamOptions(_OpenAIBody):
    include_usage: bool | None = None


# A fill's length: `max_tokens` on every body, and chat's newer name `max_completion_tokens`.
FillTokens = Annotated[int, Field(ge=1, le=MAX_FILL_TOKENS)] | None


def refuse_logprobs(value, asked: bool, hint: str):
    """One wording for every body: logprobs are refused, never invented (docs/api.md says why)."""
    if asked:
        raise ValueError(f"logprobs are not supported: a diffusion fill commits tokens out of order, and "
                         f"per-token log-probabilities are not reported ({hint})")
    return value


class _Addressed(_OpenAIBody):
    """What every OpenAI-shaped body carries: the model name asked for, and how to stream."""

    model: Text | None = None  # echoed back: a lone surrogate would break the answer's encoding
    stream: bool | None = None
    stream_options: StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class _Sampling(_Addressed):
    """The sampling fields that completions and chat share: one definition for both bodies."""

    max_tokens: FillTokens = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: Seed | None = None
    stop: Stop = None
    n: int | None = Field(None, ge=1, le=MAX_CHOICES)

    @property
    def stops(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    @property
    def choices_per_prompt(self) -> int:
        return self.n or 1


class CompletionBody(_Sampling):
    """POST /v1/completions and /v1/fim/completions: `prompt` (+ `suffix`) filled by diffusion."""

    prompt: Text | Annotated[list[Text], Field(min_length=1, max_length=MAX_PROMPTS)]
    suffix: Text | None = None
    echo: bool | None = None
    logprobs: int | None = None
    best_of: int | None = None

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, value):
        if value:
            raise ValueError("echo is not supported: the answer is the fill alone (join it to your prompt yourself)")
        return value

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value):
        return refuse_logprobs(value, value is not None, "send null")

    @field_validator("best_of")
    @classmethod
    def _best_of_range(cls, value):
        if value is not None and not 1 <= value <= MAX_CANDIDATES:
            raise ValueError(f"best_of must be in [1, {MAX_CANDIDATES}]")
        return value

    @model_validator(mode="after")
    def _best_of_alone(self):
        # OpenAI's best_of returns the n best of best_of fills; ours keeps one (the model's best
        # reading of fill + following code, candidates.py), and like OpenAI's it cannot stream.
        if (self.best_of or 1) > 1 and (self.n or 1) > 1:
            raise ValueError("best_of > 1 returns one fill per prompt: send n = 1 (or null) with it")
        if (self.best_of or 1) > 1 and self.stream:
            raise ValueError("best_of > 1 cannot be used with stream")
        return self

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)

    @property
    def fill_tokens(self) -> int:
        return OPENAI_DEFAULT_MAX_TOKENS if self.max_tokens is None else self.max_tokens


class ContentPart(_OpenAIBody):
    """One of OpenAI's content parts; only text parts are read, and their text is whole text
    (a lone surrogate would break the tokenizer and the answer's encoding: a 400, not a 500)."""

    type: str
    text: Text | None = None


class ChatMessage(_OpenAIBody):
    role: Literal["system", "user", "assistant", "developer"]
    # A string, or OpenAI's list of content parts of which only text parts are read.
    content: Text | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            if any(part.type != "text" or part.text is None for part in self.content):
                raise ValueError("only text content parts are supported")
            return "".join(part.text for part in self.content)
        return self.content or ""


class ChatBody(_Sampling):
    """POST /v1/chat/completions: messages rendered by the checkpoint's chat template."""

    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=256)]
    max_completion_tokens: FillTokens = None
    # Inception's name: stream every intermediate canvas (whole text, masks shown) instead of deltas.
    diffusing: bool | None = None
    tools: list | None = None
    response_format: dict | None = None
    logprobs: bool | None = None

    @field_validator("tools")
    @classmethod
    def _no_tools(cls, value):
        if value:
            raise ValueError("tool calls are not supported by this daemon")
        return value

    @field_validator("response_format")
    @classmethod
    def _plain_text(cls, value):
        if value and value.get("type") not in (None, "text"):
            raise ValueError("only response_format {\"type\": \"text\"} is supported (no JSON mode)")
        return value

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value):
        return refuse_logprobs(value, bool(value), "send false or null")

    @property
    def fill_tokens(self) -> int:
        limit = self.max_completion_tokens or self.max_tokens
        return DEFAULT_CHAT_TOKENS if limit is None else limit


DEFAULT_CHAT_TOKENS = 256  # OpenAI's chat default is "until done": ours must be a canvas length


class EditBody(_Addressed):
    """POST /v1/edit/completions: one user message in a Mercury Edit format (edit.py)."""

    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=16)]
    # Mercury Edit's clients send max_tokens, temperature, top_p, presence_penalty too: accepted and
    # ignored (the answer's length is the merged code or the editable region, not a token budget).
