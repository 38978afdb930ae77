"""The bridge between callers and the engine: plain dataclasses, no torch.

`dllm_lsp` (server, batch command) builds an `InfillRequest`, an engine client
carries it in-process or over HTTP as JSON, and the engine answers with an
`InfillResult`. Nothing here imports torch, so the language server can import
this module and still start in well under a second.

Validation lives here too (`from_dict` raises `ProtocolError` with a message a
user can act on); the daemon turns it into HTTP 400.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

Confidence = Literal["max_prob", "margin", "neg_entropy"]
CanvasCache = Literal["exact", "delayed"]
Priority = Literal["interactive", "batch"]
FinishReason = Literal["end", "max_tokens", "cancelled", "deadline", "error", "unsure"]

CONFIDENCE_KINDS: tuple[str, ...] = ("max_prob", "margin", "neg_entropy")
CANVAS_CACHES: tuple[str, ...] = ("exact", "delayed")
PRIORITIES: tuple[str, ...] = ("interactive", "batch")
# Hole fields that change only how soon an answer comes, never what it says: a client may
# leave them out for an engine older than them (clients.DaemonClient) rather than fail.
HINT_FIELDS = frozenset({"near_tokens"})
MAX_CANDIDATES = 8  # fills per hole under best of N: each costs a batch row of every pass
MIN_TEMPERATURE = 1e-3


class ProtocolError(ValueError):
    """A request that cannot be served as written (a 4xx, never a crash)."""


class EngineBusy(RuntimeError):
    """The engine's queue is full; the caller should retry or drop the request."""


class RequestCancelled(RuntimeError):
    """The request was cancelled before it finished."""


@dataclass(frozen=True)
class DiffusionParams:
    """Per-request denoising settings (the engine's own defaults live in EngineConfig)."""

    # Commit every masked slot whose confidence clears this (at least one per pass).
    # 1.0 or more means "one token per pass", the reference samplers' behaviour.
    threshold: float = 0.9
    confidence: Confidence = "max_prob"
    temperature: float = 0.0
    top_p: float = 1.0
    # Re-mask committed tokens whose probability fell below this (0 disables).
    remask_below: float = 0.0
    # Hard cap on denoising passes per hole (None: canvas length, the worst case).
    max_passes: int | None = None
    seed: int = 0
    # "exact": every pass recomputes every canvas slot. "delayed": a committed slot's
    # keys/values are kept from the pass after its commit (dKV-Cache's delayed rule) and
    # only the other slots are recomputed; fewer FLOPs per pass, approximate (the kept
    # K/V no longer see later commits). Native models only; others run exact.
    canvas_cache: CanvasCache = "exact"
    # Best of N (candidates.py): fill each hole this many ways (greedy, then samples) and keep
    # the fill under which the model reads the fill and the code after it best. Not streamed.
    candidates: int = 1

    def validate(self) -> None:
        if not (0.0 < self.threshold <= 2.0):
            raise ProtocolError(f"threshold must be in (0, 2], got {self.threshold!r}")
        if self.confidence not in CONFIDENCE_KINDS:
            raise ProtocolError(f"confidence must be one of {CONFIDENCE_KINDS}, got {self.confidence!r}")
        # A tiny positive temperature overflows logits / T to inf: NaN probabilities failed the pass.
        if not (self.temperature == 0.0 or MIN_TEMPERATURE <= self.temperature <= 10.0):
            raise ProtocolError(f"temperature must be 0 (greedy) or in [{MIN_TEMPERATURE}, 10], got {self.temperature!r}")
        if not (0.0 < self.top_p <= 1.0):
            raise ProtocolError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not (0.0 <= self.remask_below < 1.0):
            raise ProtocolError(f"remask_below must be in [0, 1), got {self.remask_below!r}")
        if self.max_passes is not None and not (1 <= self.max_passes <= 4096):
            raise ProtocolError(f"max_passes must be in [1, 4096], got {self.max_passes!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ProtocolError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.canvas_cache not in CANVAS_CACHES:
            raise ProtocolError(f"canvas_cache must be one of {CANVAS_CACHES}, got {self.canvas_cache!r}")
        if not _is_int(self.candidates) or not (1 <= self.candidates <= MAX_CANDIDATES):
            raise ProtocolError(f"candidates must be an integer in [1, {MAX_CANDIDATES}], got {self.candidates!r}")


@dataclass(frozen=True)
class Hole:
    """One span to fill: the text before it and the text after it.

    `prefix` and `suffix` are already trimmed by the caller to its token budget
    (the engine refuses a context longer than the model's window).
    `max_tokens` bounds the fill; `bucket` optionally fixes the first canvas
    length (otherwise the engine picks the smallest bucket, then grows).
    """

    prefix: str
    suffix: str = ""
    max_tokens: int = 64
    bucket: int | None = None
    # The fill ends before the first of these strings (e.g. ["\n"] for a rest-of-line
    # completion). A committed token holding one also ends the canvas there, so the
    # slots after it are never denoised: fewer passes, not just a shorter answer.
    stop: tuple[str, ...] = ()
    # The fill ends before its first later line indented less than this many characters of
    # leading whitespace (a line that leaves the block the fill is in; blank lines do not
    # count, nor does the fill's first line): a multi-line completion in an indented language
    # stops where the editor would cut it, instead of running to max_tokens.
    stop_indent: int | None = None
    # The fill ends once it loops (a line three times in a row, a group of 2-4 lines twice, a
    # phrase three times in a row in a line), cut after the loop's first unit: the language
    # server's own cut (repeat_stop.py), so the passes after a loop starts are never run.
    stop_repeats: bool = False
    # The fill ends after this many lines that hold something, at the first line break after
    # them where its brackets and triple-quoted strings are closed (line_cap.py): the language
    # server shows no more (its multilineMaxLines), so the passes after them are never run.
    max_lines: int | None = None
    # The fill may not begin, after blank text, with any of these strings (start_ban.py): the
    # language server bans a docstring's quotes at a new function's empty body, so the model
    # writes the code instead. A banned token is never committed there, not cut afterwards.
    banned_starts: tuple[str, ...] = ()
    # The fill ends, finish reason "unsure", at the first token of it the model chose with a
    # probability below this (unsure_stop.py); its text is what came before that token. The
    # language server asks it of typing-triggered single-line suggestions and shows nothing for
    # an unsure fill: on held-out lines, wrong suggestions were the low-probability ones.
    min_token_prob: float | None = None
    # The fill ends where it starts writing the code after the hole again (suffix_stop.py: the
    # suffix's first line that holds something, two when that one is short), cut before it: a
    # pretrained base never learned to end a middle, and where it wrote the middle right it
    # goes on with the suffix. Off only for a caller that wants the model's text as it came.
    stop_at_suffix: bool = True
    # A finished fill with line breaks in it ends at the one after which the model reads the
    # code after the hole best (fill_end.py: the fill cut at each of its first line breaks, all
    # read with the suffix's first tokens in one more pass): a base that never learned to end a
    # middle writes on past it. A stream sends such a fill's first line as it settles, the rest
    # once the end is chosen.
    choose_end: bool = True
    # At a place whose context is not cached, the fill reads only the nearest this many tokens
    # of it (the suffix's start, at most a quarter, and the prefix's end) while the engine
    # encodes the whole context behind it (near_context.py); None: always the whole. For
    # answers where waiting costs more than the far context adds (the editor's typed ghost
    # text); ignored where the fill is read again against its context (best of N, a
    # multi-line fill's chosen end).
    near_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("stop", "banned_starts"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def validate(self) -> None:
        if not isinstance(self.prefix, str) or not isinstance(self.suffix, str):
            raise ProtocolError("prefix and suffix must be strings")
        if (not isinstance(self.stop, tuple) or not all(isinstance(s, str) and s for s in self.stop)
                or len(self.stop) > 8):
            raise ProtocolError(f"stop must be a list of at most 8 non-empty strings, got {self.stop!r:.80}")
        # bool is an int subclass, and 2.5 compares fine: both would reach the engine as a length.
        if not _is_int(self.max_tokens) or not (1 <= self.max_tokens <= 1024):
            raise ProtocolError(f"max_tokens must be an integer in [1, 1024], got {self.max_tokens!r}")
        if self.bucket is not None and (not _is_int(self.bucket) or not (1 <= self.bucket <= self.max_tokens)):
            raise ProtocolError(f"bucket must be an integer in [1, max_tokens], got {self.bucket!r}")
        if self.stop_indent is not None and (not _is_int(self.stop_indent) or not (1 <= self.stop_indent <= 1024)):
            raise ProtocolError(f"stop_indent must be an integer in [1, 1024], got {self.stop_indent!r}")
        if self.max_lines is not None and (not _is_int(self.max_lines) or not (1 <= self.max_lines <= 1024)):
            raise ProtocolError(f"max_lines must be an integer in [1, 1024], got {self.max_lines!r}")
        if (not isinstance(self.banned_starts, tuple) or len(self.banned_starts) > 32
                or not all(isinstance(s, str) and s.strip() and len(s) <= 16 for s in self.banned_starts)):
            raise ProtocolError("banned_starts must be a list of at most 32 strings of 1-16 characters, "
                                f"not blank, got {self.banned_starts!r:.80}")
        for name in ("stop_repeats", "stop_at_suffix", "choose_end"):
            if not isinstance(getattr(self, name), bool):
                raise ProtocolError(f"{name} must be true or false, got {getattr(self, name)!r:.40}")
        if self.min_token_prob is not None and (not _is_number(self.min_token_prob)
                                                or not (0.0 < self.min_token_prob < 1.0)):
            raise ProtocolError(f"min_token_prob must be a number in (0, 1), got {self.min_token_prob!r:.40}")
        if self.near_tokens is not None and (not _is_int(self.near_tokens) or not (64 <= self.near_tokens <= 65536)):
            raise ProtocolError(f"near_tokens must be an integer in [64, 65536], got {self.near_tokens!r:.40}")


def validate_scheduling(priority: object, deadline_s: object) -> None:
    """The scheduling fields every engine request carries (infill, next edit)."""
    if priority not in PRIORITIES:
        raise ProtocolError(f"priority must be one of {PRIORITIES}, got {priority!r}")
    if deadline_s is not None and not (0.0 < deadline_s <= 3600.0):
        raise ProtocolError(f"deadline_s must be in (0, 3600], got {deadline_s!r}")


@dataclass
class InfillRequest:
    """Several holes of one file, filled in one batch against their contexts."""

    holes: list[Hole]
    params: DiffusionParams = field(default_factory=DiffusionParams)
    priority: Priority = "interactive"
    # Seconds from submission after which the engine stops and returns what it has.
    deadline_s: float | None = None
    # Send intermediate canvases to a stream callback (SSE on the daemon).
    stream: bool = False
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def validate(self) -> None:
        if not self.holes:
            raise ProtocolError("a request needs at least one hole")
        if len(self.holes) > 256:
            raise ProtocolError(f"at most 256 holes per request, got {len(self.holes)}")
        for hole in self.holes:
            hole.validate()
        self.params.validate()
        validate_scheduling(self.priority, self.deadline_s)
        if self.stream and self.params.candidates > 1:  # which canvas would it show? (OpenAI refuses best_of too)
            raise ProtocolError("a request with candidates > 1 cannot stream its canvases")
        if len(self.holes) * self.params.candidates > 256:
            raise ProtocolError(f"at most 256 fills per request: {len(self.holes)} holes x {self.params.candidates} candidates")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_wire(self, omit: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
        """to_dict() with each hole's fields left out where they hold their default (the engine
        fills them in), and the hole fields in `omit` left out: a body an engine older than a
        field still takes when the request does not use it."""
        body = self.to_dict()
        defaults = {f.name: f.default for f in dataclasses.fields(Hole) if f.default is not dataclasses.MISSING}
        body["holes"] = [{k: v for k, v in h.items()
                          if k not in omit and not (k in defaults and _same(v, defaults[k]))} for h in body["holes"]]
        return body

    @classmethod
    def from_dict(cls, data: Any) -> "InfillRequest":
        if not isinstance(data, dict):
            raise ProtocolError("request body must be a JSON object")
        holes_raw = data.get("holes")
        if not isinstance(holes_raw, list):
            raise ProtocolError("'holes' must be a list of {prefix, suffix, max_tokens?, bucket?}")
        holes = [_build(Hole, h, "hole") for h in holes_raw]
        params = _build(DiffusionParams, data.get("params") or {}, "params")
        known = {"holes", "params", "priority", "deadline_s", "stream", "request_id"}
        unknown = set(data) - known
        if unknown:
            raise ProtocolError(f"unknown request fields: {sorted(unknown)}")
        kwargs: dict[str, Any] = {"holes": holes, "params": params}
        for key in ("priority", "deadline_s", "stream", "request_id"):
            if key in data and data[key] is not None:
                kwargs[key] = data[key]
        req = cls(**kwargs)
        try:
            req.validate()
        except TypeError as exc:  # e.g. a string where a number belongs
            raise ProtocolError(f"bad field type: {exc}") from None
        return req


@dataclass
class HoleResult:
    text: str
    finish_reason: FinishReason
    passes: int
    tokens: int  # tokens committed in the fill (padding excluded)
    # Tokens committed at each pass, for "tokens per pass" statistics.
    committed_per_pass: list[int] = field(default_factory=list)
    # Best of N (params.candidates): the other distinct fills, the best read first (an editor
    # may offer them beside `text`); empty for a single fill.
    alternatives: list[str] = field(default_factory=list)


@dataclass
class InfillResult:
    request_id: str
    holes: list[HoleResult]
    model: str
    elapsed_ms: float
    queued_ms: float = 0.0
    # What held the engine while the request waited, ms per kind: "passes" (requests running,
    # their ends chosen and best of N's scored included),
    # "encoding" (contexts of requests admitted before it, superseded ones too; "batch encoding"
    # for batch requests': a prefetch's, a refactor's), "scoring"
    # (hints), "prepare" (a cursor's context), "catch-up" (a near-read place's whole context,
    # near_context.py), "next edit", "calls" (other work from other threads), "heap trim".
    queued_for: dict[str, float] = field(default_factory=dict)
    # The same from admission to the answer: its own passes (batched with others') and whatever
    # ran between them; what neither covers was the loop's own bookkeeping.
    active_for: dict[str, float] = field(default_factory=dict)
    # Holes filled from the near part of their context (Hole.near_tokens), its whole not cached yet.
    near_holes: int = 0
    context_tokens: int = 0  # context tokens over all holes
    cached_tokens: int = 0  # of which were served by the context cache

    @property
    def passes(self) -> int:
        return max((h.passes for h in self.holes), default=0)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "InfillResult":
        holes = [HoleResult(**h) for h in data["holes"]]
        rest = {k: v for k, v in data.items() if k != "holes"}
        return cls(holes=holes, **rest)


@dataclass
class CanvasEvent:
    """An intermediate canvas, streamed while a request denoises."""

    request_id: str
    hole: int
    step: int
    text: str  # committed tokens so far, masks shown as MASK_GLYPH
    masked: int


@dataclass
class SettledText:
    """A hole's settled run after a pass (the streaming hook, `Engine.submit(on_settled=)`):
    the committed tokens from the hole's start up to its first still-masked slot, and
    their text as the fill will show it (healing undone). With re-masking off these
    tokens never change again; the text may still end in half a UTF-8 character."""

    request_id: str
    hole: int
    step: int
    ids: list[int]
    text: str


MASK_GLYPH = "\u2591"  # light shade: how a still-masked slot is shown in a streamed canvas


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A real number (not a bool, not NaN: NaN fails every range check silently)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _build(cls: type, data: Any, what: str):
    if not isinstance(data, dict):
        raise ProtocolError(f"{what} must be a JSON object")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ProtocolError(f"unknown {what} fields: {sorted(unknown)}")
    try:
        return cls(**data)
    except TypeError as exc:  # missing required field
        raise ProtocolError(f"bad {what}: {exc}") from None


@dataclass
class ScoreRequest:
    """Score every token of `span` (existing code) given the text around it (scoring.py).

    A model that reads its canvas both ways masks each token once (a `stride`-th of the
    span at a time, all in one batched pass) and reads its probability back; a model that
    reads it left to right (the default model) scores the span in one causal pass, each
    token given the suffix and what comes before it (`stride` does not apply). Very
    unlikely tokens are candidates for a fix (typos).
    """

    prefix: str
    span: str
    suffix: str = ""
    stride: int = 4
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # Background work (the language server's hints): each window of the span waits until no
    # request is waiting or running, at most 2 s (Engine.score); otherwise it runs between passes.
    background: bool = False

    def validate(self) -> None:
        if not all(isinstance(x, str) for x in (self.prefix, self.span, self.suffix)):
            raise ProtocolError("prefix, span and suffix must be strings")
        if not isinstance(self.background, bool):
            raise ProtocolError(f"background must be true or false, got {self.background!r:.40}")
        if not self.span:
            raise ProtocolError("span must not be empty")
        if len(self.span) > 4000:
            raise ProtocolError(f"span of {len(self.span)} characters is too long to score at once (max 4000)")
        if not (1 <= self.stride <= 16):
            raise ProtocolError(f"stride must be in [1, 16], got {self.stride!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "ScoreRequest":
        req = _build(cls, data, "score request")
        try:
            req.validate()
        except TypeError as exc:
            raise ProtocolError(f"bad field type: {exc}") from None
        return req


@dataclass
class TokenScore:
    start: int  # character offsets into the span
    end: int
    text: str
    prob: float  # the model's probability of the token that is there
    alternative: str  # the model's preferred token at this slot
    alternative_prob: float


@dataclass
class ScoreResult:
    request_id: str
    tokens: list[TokenScore]
    model: str
    elapsed_ms: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ScoreResult":
        return cls(tokens=[TokenScore(**t) for t in data["tokens"]],
                   **{k: v for k, v in data.items() if k != "tokens"})


def _same(value: Any, default: Any) -> bool:
    """Whether a field's value is its default as the engine would read it back (a tuple and
    the list JSON makes of it are the same; True is not 1)."""
    if isinstance(default, tuple) and isinstance(value, (list, tuple)):
        return list(value) == list(default)
    return type(value) is type(default) and value == default
