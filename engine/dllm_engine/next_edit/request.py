"""The next-edit request and its result: plain dataclasses, no torch.

A caller (the language server, the daemon's `/v1/edit/completions`) sends the
document as it is now, the user's recent edits (newest last), the editable
line range and the cursor; the engine answers with the region as it would
read after the next edit and, per re-masked span that changed, the original
and the new text with the model's confidence. No change is a valid answer, and
the common one.

Offsets are str (code point) offsets into `document`, lines 0-based with the
end exclusive: the same conventions as the rest of the protocol.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from ..protocol import DiffusionParams, Priority, ProtocolError, validate_scheduling

SpanMode = Literal["chosen", "whole_region"]
SPAN_MODES: tuple[str, ...] = ("chosen", "whole_region")
MAX_DOCUMENT_CHARS = 2_000_000
MAX_REGION_LINES = 400
MAX_REGION_CHARS = 24_000
MAX_EDITS = 16
MAX_CALLER_SPANS = 32


@dataclass(frozen=True)
class RecentEdit:
    """One edit the user made: at `offset`, `removed` was replaced by `inserted`.

    `offset` is where `inserted` starts in the document the request carries; for
    the newest edit it must match (the engine checks). Older edits are read for
    what they removed only, since later edits may have moved them.
    """

    offset: int
    removed: str = ""
    inserted: str = ""


@dataclass(frozen=True)
class CallerSpan:
    """A span the caller wants re-masked (e.g. other uses of a renamed name it found)."""

    start: int
    end: int


@dataclass
class NextEditRequest:
    document: str
    edits: list[RecentEdit]
    region_start_line: int
    region_end_line: int  # exclusive
    cursor: int
    spans: list[CallerSpan] = field(default_factory=list)
    # The caller parsed the code and `spans` are every code use of the names the newest edit
    # renamed and every argument list of the function it gave a parameter, in the region (none
    # is an answer: no use left in the rename's scope). Seeds it did not name are not re-masked.
    spans_are_uses: bool = False
    # "chosen": the spans selected from the edit and the scores (the product);
    # "whole_region": every line of the region but the edited ones (a benchmark baseline).
    mode: SpanMode = "chosen"
    # At most this many spans are re-masked (nearest the cursor first).
    max_spans: int = 8
    # The scoring pass scores at most this many tokens of the region from the edit on (and, for
    # the stream, reads as many of the text before the edit again). 64, not 128: on the full
    # next-edit benchmark the same proposals, one forward's rows fewer (RESULTS.md, tenth session).
    score_tokens: int = 64
    # A scored token below this probability is a candidate span.
    suspicious_below: float = 0.02
    params: DiffusionParams = field(default_factory=DiffusionParams)
    priority: Priority = "interactive"
    deadline_s: float | None = None
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        # JSON and keyword callers hand over dicts; the engine works on the dataclasses.
        self.edits = [RecentEdit(**e) if isinstance(e, dict) else e for e in self.edits]
        self.spans = [CallerSpan(**s) if isinstance(s, dict) else s for s in self.spans]
        if isinstance(self.params, dict):
            self.params = DiffusionParams(**self.params)

    @property
    def last_edit(self) -> RecentEdit | None:
        return self.edits[-1] if self.edits else None

    def validate(self) -> None:
        doc = self.document
        if not isinstance(doc, str):
            raise ProtocolError("document must be a string")
        if len(doc) > MAX_DOCUMENT_CHARS:
            raise ProtocolError(f"document of {len(doc)} characters is too long (max {MAX_DOCUMENT_CHARS})")
        if len(self.edits) > MAX_EDITS:
            raise ProtocolError(f"at most {MAX_EDITS} recent edits, got {len(self.edits)}")
        n_lines = doc.count("\n") + 1
        if not (0 <= self.region_start_line < self.region_end_line <= n_lines):
            raise ProtocolError(f"region lines [{self.region_start_line}, {self.region_end_line}) are not "
                                f"a non-empty range within the document's {n_lines} lines")
        if self.region_end_line - self.region_start_line > MAX_REGION_LINES:
            raise ProtocolError(f"region of {self.region_end_line - self.region_start_line} lines is too long "
                                f"(max {MAX_REGION_LINES})")
        if not (0 <= self.cursor <= len(doc)):
            raise ProtocolError(f"cursor {self.cursor} is outside the document (0..{len(doc)})")
        for edit in self.edits:
            if not (isinstance(edit.removed, str) and isinstance(edit.inserted, str)):
                raise ProtocolError("an edit's removed and inserted must be strings")
            if not (0 <= edit.offset <= len(doc)):
                raise ProtocolError(f"edit offset {edit.offset} is outside the document")
        last = self.last_edit
        if last is not None and doc[last.offset:last.offset + len(last.inserted)] != last.inserted:
            raise ProtocolError("the newest edit's inserted text is not at its offset in the document "
                                "(edits are newest last, offsets into the document sent)")
        if len(self.spans) > MAX_CALLER_SPANS:
            raise ProtocolError(f"at most {MAX_CALLER_SPANS} caller spans, got {len(self.spans)}")
        for span in self.spans:
            if not (0 <= span.start < span.end <= len(doc)):
                raise ProtocolError(f"span [{span.start}, {span.end}) is not a non-empty range of the document")
        if self.mode not in SPAN_MODES:
            raise ProtocolError(f"mode must be one of {SPAN_MODES}, got {self.mode!r}")
        if not (1 <= self.max_spans <= 64):
            raise ProtocolError(f"max_spans must be in [1, 64], got {self.max_spans!r}")
        if not (0 <= self.score_tokens <= 512):
            raise ProtocolError(f"score_tokens must be in [0, 512] (0: no scoring pass), got {self.score_tokens!r}")
        if not (0.0 <= self.suspicious_below < 1.0):
            raise ProtocolError(f"suspicious_below must be in [0, 1), got {self.suspicious_below!r}")
        self.params.validate()
        validate_scheduling(self.priority, self.deadline_s)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class EditSpan:
    """One re-masked span whose text the model changed."""

    start: int  # offsets into the request's document (the text replaced)
    end: int
    original: str
    new: str
    confidence: float  # geometric mean of the model's probabilities of the new tokens, in context
    source: str  # why it was re-masked: "edit", "score", "caller" or "region"


@dataclass
class NextEditResult:
    request_id: str
    region_start_line: int
    region_end_line: int
    region_text: str  # the region after the proposed edit ("" lines included as they are)
    spans: list[EditSpan]  # the changed spans, in document order; empty: no change proposed
    masked_spans: int  # how many spans were re-masked (changed or not)
    scored_tokens: int
    model: str
    elapsed_ms: float

    @property
    def changed(self) -> bool:
        return bool(self.spans)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "NextEditResult":
        spans = [EditSpan(**s) for s in data["spans"]]
        return cls(spans=spans, **{k: v for k, v in data.items() if k != "spans"})
