"""POST /v1/next_edit: the daemon's strict body for a `NextEditRequest`.

Same rules as `http_schemas.py` (strict types, unknown fields refused, defaults
read from the dataclass); what spans fields (the newest edit at its offset, the
region within the document) is checked by `NextEditRequest.validate()`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..http_schemas import ParamsBody, RequestId, Text, _Body
from ..protocol import Priority
from .request import (
    MAX_CALLER_SPANS,
    MAX_DOCUMENT_CHARS,
    MAX_EDITS,
    CallerSpan,
    NextEditRequest,
    RecentEdit,
    SpanMode,
)

Offset = Annotated[int, Field(ge=0, le=MAX_DOCUMENT_CHARS)]
_DEFAULTS = NextEditRequest(document="", edits=[], region_start_line=0, region_end_line=1, cursor=0)


class RecentEditBody(_Body):
    offset: Offset
    removed: Text = ""
    inserted: Text = ""

    def build(self) -> RecentEdit:
        return RecentEdit(**self.model_dump())


class CallerSpanBody(_Body):
    start: Offset
    end: Offset

    def build(self) -> CallerSpan:
        return CallerSpan(**self.model_dump())


class NextEditBody(_Body):
    document: Annotated[Text, Field(max_length=MAX_DOCUMENT_CHARS)]
    edits: list[RecentEditBody] = Field(max_length=MAX_EDITS)
    region_start_line: Annotated[int, Field(ge=0)]
    region_end_line: Annotated[int, Field(ge=1)]
    cursor: Offset
    spans: list[CallerSpanBody] = Field(default_factory=list, max_length=MAX_CALLER_SPANS)
    spans_are_uses: bool = _DEFAULTS.spans_are_uses
    mode: SpanMode = _DEFAULTS.mode
    max_spans: int = Field(_DEFAULTS.max_spans, ge=1, le=64)
    score_tokens: int = Field(_DEFAULTS.score_tokens, ge=0, le=512)
    suspicious_below: float = Field(_DEFAULTS.suspicious_below, ge=0.0, lt=1.0)
    params: ParamsBody | None = None
    priority: Priority = _DEFAULTS.priority
    deadline_s: float | None = Field(None, gt=0.0, le=3600.0)
    request_id: RequestId | None = None

    def build(self) -> NextEditRequest:
        data = self.model_dump(exclude={"edits", "spans", "params", "request_id"})
        extra = {"request_id": self.request_id} if self.request_id is not None else {}
        req = NextEditRequest(edits=[e.build() for e in self.edits], spans=[s.build() for s in self.spans],
                              params=(self.params or ParamsBody()).build(), **data, **extra)
        req.validate()
        return req
