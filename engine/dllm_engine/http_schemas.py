"""The daemon's HTTP request bodies: one strict pydantic model per body.

Every body is checked here, at the boundary, before anything reaches the engine:
types, ranges and unknown fields, generated from one definition per body
instead of hand checks in each handler. Strict mode: JSON `true` or `2.0` is
not an integer (both once reached the engine as a canvas length and hung the
request). Defaults are the protocol dataclasses' own, read from them, so the two
cannot drift; `validate()` on the dataclasses still checks what spans fields
(a bucket within max_tokens) for in-process callers too.

`parse_body` turns raw bytes into a model or a `ProtocolError` (HTTP 400) whose
message names the field, e.g. `holes.0.max_tokens: Input should be a valid integer`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .prepare import PrepareRequest
from .protocol import (
    CanvasCache,
    Confidence,
    DiffusionParams,
    Hole,
    MAX_CANDIDATES,
    InfillRequest,
    Priority,
    ProtocolError,
    ScoreRequest,
)

MAX_ERRORS_SHOWN = 3


class FieldError(ProtocolError):
    """A body field that failed validation; `param` names it (OpenAI's error `param`)."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.param = param


def _whole_text(value: Any) -> Any:
    """JSON allows a lone UTF-16 surrogate (half an emoji); no tokenizer can encode one.
    Checked before pydantic's own str checks, which would say only "not a valid string"."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"holds a lone UTF-16 surrogate at character {exc.start}") from None
    return value


Text = Annotated[str, BeforeValidator(_whole_text)]
StopText = Annotated[str, Field(min_length=1), BeforeValidator(_whole_text)]
# Not blank: a blank "start" would ban every fill that begins with text.
BannedStart = Annotated[str, Field(min_length=1, max_length=16, pattern=r"\S"), BeforeValidator(_whole_text)]
RequestId = Annotated[str, Field(min_length=1, max_length=128)]
# The sampler seeds torch with seed * 1000003 + hole: keep that within 64 bits.
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class HoleBody(_Body):
    prefix: Text
    suffix: Text = Hole.suffix
    max_tokens: int = Field(Hole.max_tokens, ge=1, le=1024)
    bucket: int | None = Field(Hole.bucket, ge=1, le=1024)
    stop: list[StopText] = Field(default_factory=list, max_length=8)
    stop_indent: int | None = Field(Hole.stop_indent, ge=1, le=1024)
    stop_repeats: bool = Hole.stop_repeats
    stop_at_suffix: bool = Hole.stop_at_suffix
    choose_end: bool = Hole.choose_end
    max_lines: int | None = Field(Hole.max_lines, ge=1, le=1024)
    banned_starts: list[BannedStart] = Field(default_factory=list, max_length=32)
    min_token_prob: float | None = Field(Hole.min_token_prob, gt=0.0, lt=1.0)
    near_tokens: int | None = Field(Hole.near_tokens, ge=64, le=65536)

    def build(self) -> Hole:
        return Hole(**self.model_dump())


class ParamsBody(_Body):
    threshold: float = Field(DiffusionParams.threshold, gt=0.0, le=2.0)
    confidence: Confidence = DiffusionParams.confidence
    temperature: float = Field(DiffusionParams.temperature, ge=0.0, le=10.0)
    top_p: float = Field(DiffusionParams.top_p, gt=0.0, le=1.0)
    remask_below: float = Field(DiffusionParams.remask_below, ge=0.0, lt=1.0)
    max_passes: int | None = Field(DiffusionParams.max_passes, ge=1, le=4096)
    seed: Seed = DiffusionParams.seed
    canvas_cache: CanvasCache = DiffusionParams.canvas_cache
    candidates: int = Field(DiffusionParams.candidates, ge=1, le=MAX_CANDIDATES)

    def build(self) -> DiffusionParams:
        return DiffusionParams(**self.model_dump())


class InfillBody(_Body):
    """POST /v1/infill. At least one hole: the dataclass says so in its own words."""

    holes: list[HoleBody] = Field(max_length=256)
    params: ParamsBody | None = None
    priority: Priority = InfillRequest.priority
    deadline_s: float | None = Field(InfillRequest.deadline_s, gt=0.0, le=3600.0)
    stream: bool = InfillRequest.stream
    request_id: RequestId | None = None

    def build(self) -> InfillRequest:
        extra = {"request_id": self.request_id} if self.request_id is not None else {}
        req = InfillRequest(holes=[h.build() for h in self.holes],
                            params=(self.params or ParamsBody()).build(), priority=self.priority,
                            deadline_s=self.deadline_s, stream=self.stream, **extra)
        req.validate()
        return req


class ScoreBody(_Body):
    """POST /v1/score."""

    prefix: Text
    span: Annotated[Text, Field(min_length=1, max_length=4000)]
    suffix: Text = ScoreRequest.suffix
    stride: int = Field(ScoreRequest.stride, ge=1, le=16)
    background: bool = ScoreRequest.background
    request_id: RequestId | None = None

    def build(self) -> ScoreRequest:
        data = self.model_dump(exclude_none=True)
        req = ScoreRequest(**data)
        req.validate()
        return req


class PrepareBody(_Body):
    """POST /v1/prepare: the text around a place where a request may soon come (prepare.py)."""

    prefix: Text
    suffix: Text = PrepareRequest.suffix
    request_id: RequestId | None = None

    def build(self) -> PrepareRequest:
        req = PrepareRequest(**self.model_dump(exclude_none=True))
        req.validate()
        return req


Body = TypeVar("Body", bound=_Body)


def decode_json(raw: bytes) -> Any:
    """JSON from a request body, or a ProtocolError (never a 500)."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError("request body is not valid JSON") from None
    except RecursionError:  # the C decoder recurses per level: 100,000 `[` is valid JSON, and deep
        raise ProtocolError("request body nests too deeply") from None


def parse_body(schema: type[Body], raw: bytes) -> Body:
    data = decode_json(raw)
    if not isinstance(data, dict):
        raise ProtocolError("request body must be a JSON object")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise FieldError(describe(exc), first_field(exc)) from None
    except RecursionError:  # deep nesting inside a field
        raise ProtocolError("request body nests too deeply") from None


def first_field(exc: ValidationError) -> str | None:
    """The dotted path of the first failing field (`holes.0.max_tokens`), None for the body itself."""
    errors = exc.errors(include_url=False, include_input=False)
    loc = errors[0]["loc"] if errors else ()
    return ".".join(str(p) for p in loc) or None


def describe(exc: ValidationError) -> str:
    """`field.path: what is wrong` for the first few errors, never echoing the input."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:MAX_ERRORS_SHOWN]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
