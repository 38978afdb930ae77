"""The server's settings: typed dataclasses with defaults, read from camelCase JSON.

They arrive as `initializationOptions` and again through
`workspace/didChangeConfiguration` (section `dllm`). A bad value never stops
the server: that field keeps its default and the problem is reported back as a
message the user can act on (`window/showMessage`).
"""

from __future__ import annotations

import dataclasses
import re
import types as pytypes
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from ..syntax.context import EmptyBodyPolicy, MultilinePolicy

ENGINE_MODES = ("inProcess", "daemon", "remote", "openai")
CONFIDENCE_KINDS = ("max_prob", "margin", "neg_entropy")
LANGUAGES = ("python", "javascript", "typescript", "go", "rust", "c", "cpp", "java")


@dataclass
class EngineOptions:
    mode: Literal["inProcess", "daemon", "remote", "openai"] = "inProcess"
    model: str | None = None  # a checkpoint path; None = the embedded default model
    socket: str | None = None  # daemon: Unix socket (None = the default for the model: clients.default_socket_path)
    url: str | None = None  # remote / openai: base URL
    token: str | None = None  # bearer token (remote) or API key (openai)
    openai_model: str | None = None  # the `model` field sent to an OpenAI FIM endpoint


@dataclass
class ContextOptions:
    prefix_tokens: int = 768
    suffix_tokens: int = 256
    # Cross-file snippets (definitions of imported names from other open files, as comments
    # before the prefix) are off by default: on two samples of 160 lines of this repository's
    # own code that use such names, the default model wrote them no better with the snippets
    # (edit similarity 0.358 -> 0.352 and 0.348 -> 0.344, identifier F1 0.250 -> 0.240 and
    # 0.240 -> 0.236; benchmarks/bench_cross_file.py, RESULTS.md's forty-sixth session), and
    # they cost ~250 more context tokens at each new place. A larger model may use them.
    snippet_tokens: int = 0
    # Typed completions at a place whose context the engine has not cached read only the
    # nearest this many tokens of it while the whole is encoded behind them (Hole.near_tokens;
    # 0: always the whole). 384: a new place's first answer p50 995 -> 541 ms, exact match 14 ->
    # 11 of 189 held-out lines (the answers after it read the whole); the keystroke replay's
    # single-line p95 403 -> 243 ms on a 2-core AMD EPYC (benchmarks/RESULTS.md, thirty-second session).
    near_tokens: int = 384


@dataclass
class DiffusionOptions:
    threshold: float = 0.9
    temperature: float = 0.0
    confidence: Literal["max_prob", "margin", "neg_entropy"] = "max_prob"
    seed: int = 0
    # Cap on denoising passes per request (the last pass commits every slot left):
    # bounds keystroke latency at some cost in quality. None: the engine's default.
    max_passes: int | None = None
    # Best of N for completions the user asked for (an invoked inline completion, a range
    # edit): the engine fills the hole this many ways and keeps the one the model reads best
    # with the code after it. Typing-triggered completions fill once (latency first).
    invoked_candidates: int = 2


@dataclass
class NextEditOptions:
    # Off until measured on the default model: each pause in typing costs a scoring pass and a fill.
    enabled: bool = False
    # The editable region around the last edit, at most. 40, not 60: the first read of a region
    # costs ~1.3 ms a token on a 2-core CPU, and with the region moved to a far use when the
    # edit's own holds none, a smaller cap lost no proposal (benchmarks/RESULTS.md, tenth session).
    max_lines: int = 40
    # Proposals with a span under this are not shown; chosen on cases the benchmark does not
    # evaluate (benchmarks/calibrate_next_edit.py; RESULTS.md "eighth session: next edit quality",
    # 0.10; rerun in the tenth session on that session's engine and region cap: plateau 0.00-0.30, 0.15).
    min_confidence: float = 0.15
    debounce_ms: int = 250  # after the last keystroke (inline completion asks first)


@dataclass
class ServerOptions:
    enable: bool = True
    engine: EngineOptions = field(default_factory=EngineOptions)
    debounce_ms: int = 20  # short: a newer keystroke cancels the older request in the engine anyway
    inline_completion: bool = True
    completion: bool = True
    diagnostics: bool = True
    context: ContextOptions = field(default_factory=ContextOptions)
    languages: dict[str, bool] = field(default_factory=lambda: {name: True for name in LANGUAGES})
    diffusion: DiffusionOptions = field(default_factory=DiffusionOptions)
    # A line holding only this marker is a hole for `dllm.fillHoles` (besides
    # `pass`, `...`, `todo!()` bodies).
    fill_marker: str = "{{fill}}"
    # Where ghost text may span lines (syntax/context.py MultilinePolicy): "emptyBlock" (a new
    # block with no body yet, as Copilot and Cody decide; a blank line elsewhere gets the next
    # statement), "always" (every blank line too), "never". Range edits and fill-holes are not
    # affected. "emptyBlock": the replay's multi-line answers took ~1.4 s a fill on a 2-core CPU
    # (benchmarks/RESULTS.md, fourteenth session).
    multiline: MultilinePolicy = "emptyBlock"
    # A multi-line suggestion's most lines (a bracket open at the last one runs on to its close;
    # a docstring open there is cut and closed): the default model's guess is right, when at all, in its first lines, and the engine
    # stops there, so the passes for lines no one reads are never run. On 60 other empty bodies
    # 4 lines kept 12 of the 14 right lines, showed 154 wrong ones instead of 205, 50 fills parsed
    # instead of 38, p50 0.80x, p95 0.67x (benchmarks/RESULTS.md, eighteenth session). Raise it
    # for a stronger model.
    multiline_max_lines: int = 4
    # What a suggestion at an empty block's body (a new function's, class's, `if`'s) may start
    # with: "code", not a comment or a docstring (the engine never writes one there), or "any".
    # At 60 empty function bodies the default model began 28 fills with a docstring it made
    # up, none of which matched the real one. Starting with code, on that sample and another:
    # p50 0.74x and 0.88x, passes 0.79x and 0.97x, lines shown that stand in the real body 12
    # -> 14 and 17 -> 19 of fewer shown; p95 0.85x and 1.16x (benchmarks/RESULTS.md,
    # nineteenth session).
    empty_body: EmptyBodyPolicy = "code"
    # Fill the next line's suggestion in the background once a suggestion is shown (the
    # suggestion accepted, Enter, the editor's auto-indent: prefetch.py), so the editor's
    # request there is answered from the cache. Off for an OpenAI endpoint whatever this says.
    prefetch_next_line: bool = True
    # Encode the context where the cursor rests (`dllm/prepareCompletion`, sent by our clients)
    # before the user types there, so the first request at a new place does not wait for it
    # (cursor_prepare.py). Off for an OpenAI endpoint whatever this says.
    prepare_at_cursor: bool = True
    # A single-line suggestion the user did not ask for is not shown when the model chose one
    # of its tokens with a probability under this (0: every one is shown); the engine ends such
    # a fill at that token (Hole.min_token_prob), so its remaining passes are never run. On
    # held-out lines of this repository's source the wrong suggestions were the unsure ones:
    # benchmarks/RESULTS.md, twenty-first session, has what 0.15 hid and kept; with the shipped
    # adapter 0.2 also hid 3-6% of the suggestions a typist took (fiftieth session). An invoked
    # suggestion (the user asked) is always shown.
    line_min_token_prob: float = 0.15
    # The same gate on a multi-line suggestion (a block's start, an empty body, a blank line):
    # the engine ends the fill at the first token under this, and the server shows the complete
    # lines before that token (less block openers left without a body), or nothing when there
    # are none (0: every fill runs to its end). At two samples of empty standard-library function
    # bodies 0.15 showed 44 wrong lines instead of 90 and 63 instead of 93, the same 10 right ones
    # in each, at p50 0.64-0.73x (benchmarks/RESULTS.md, twenty-second session). An invoked
    # suggestion is always shown whole.
    multiline_min_token_prob: float = 0.15
    next_edit: NextEditOptions = field(default_factory=NextEditOptions)


# Range checks beyond the type: (path, predicate, what the value must be).
_RANGES: dict[str, tuple[typing.Callable[[Any], bool], str]] = {
    "debounceMs": (lambda v: 0 <= v <= 5000, "between 0 and 5000"),
    "context.prefixTokens": (lambda v: 16 <= v <= 16384, "between 16 and 16384"),
    "context.suffixTokens": (lambda v: 0 <= v <= 16384, "between 0 and 16384"),
    "context.snippetTokens": (lambda v: 0 <= v <= 16384, "between 0 and 16384"),
    "context.nearTokens": (lambda v: v == 0 or 64 <= v <= 16384, "0 (off) or between 64 and 16384"),
    "multilineMaxLines": (lambda v: 1 <= v <= 200, "between 1 and 200"),
    "lineMinTokenProb": (lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
    "multilineMinTokenProb": (lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
    "diffusion.threshold": (lambda v: 0.0 < v <= 2.0, "in (0, 2]"),
    "diffusion.temperature": (lambda v: 0.0 <= v <= 10.0, "in [0, 10]"),
    "diffusion.seed": (lambda v: v >= 0, "a non-negative integer"),
    "diffusion.maxPasses": (lambda v: 1 <= v <= 4096, "between 1 and 4096"),
    "diffusion.invokedCandidates": (lambda v: 1 <= v <= 8, "between 1 and 8"),
    "fillMarker": (lambda v: bool(v.strip()), "a non-empty string"),
    "nextEdit.maxLines": (lambda v: 3 <= v <= 400, "between 3 and 400"),
    "nextEdit.minConfidence": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
    "nextEdit.debounceMs": (lambda v: 0 <= v <= 5000, "between 0 and 5000"),
}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def parse_options(data: Any, base: ServerOptions | None = None) -> tuple[ServerOptions, list[str]]:
    """Read `data` over `base` (or the defaults). Returns the options and the problems found."""
    errors: list[str] = []
    start = dataclasses.replace(base) if base is not None else ServerOptions()
    if data is None:
        return start, errors
    if not isinstance(data, dict):
        return start, [f"settings must be a JSON object, got {type(data).__name__}"]
    return _read(ServerOptions, data, start, "", errors), errors


def to_json(options: Any) -> Any:
    """The camelCase JSON form (what a client would send)."""
    if dataclasses.is_dataclass(options):
        return {camel(f.name): to_json(getattr(options, f.name)) for f in dataclasses.fields(options)}
    if isinstance(options, dict):
        return {k: to_json(v) for k, v in options.items()}
    return options


def _read(cls: type, data: dict, current: Any, path: str, errors: list[str]) -> Any:
    hints = typing.get_type_hints(cls)
    by_json = {camel(f.name): f for f in dataclasses.fields(cls)}
    values = {f.name: getattr(current, f.name) for f in dataclasses.fields(cls)}
    for key, raw in data.items():
        f = by_json.get(key) or next((g for g in dataclasses.fields(cls) if g.name == key), None)
        where = f"{path}{key}"
        if f is None:
            errors.append(f"unknown setting '{where}' (ignored)")
            continue
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            if isinstance(raw, dict):
                values[f.name] = _read(hint, raw, values[f.name], where + ".", errors)
            else:
                errors.append(f"'{where}' must be an object; using defaults")
            continue
        ok, value, expected = _coerce(hint, raw)
        if ok and where in _RANGES and value is not None and not _RANGES[where][0](value):
            ok, expected = False, _RANGES[where][1]
        if ok:
            if isinstance(values[f.name], dict) and isinstance(value, dict):
                value = {**values[f.name], **value}  # per-language switches merge over the defaults
            values[f.name] = value
        else:
            errors.append(f"'{where}' must be {expected}, got {raw!r}; using {values[f.name]!r}")
    return cls(**values)


def _coerce(hint: Any, raw: Any) -> tuple[bool, Any, str]:
    """Check `raw` against a field's type: (ok, value, what was expected)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, pytypes.UnionType):
        if raw is None and type(None) in args:
            return True, None, "null"
        inner = [a for a in args if a is not type(None)]
        ok, value, expected = _coerce(inner[0], raw)
        return ok, value, expected + " or null"
    if origin is Literal:
        return raw in args, raw, "one of " + ", ".join(map(str, args))
    if origin is dict:
        ok = isinstance(raw, dict) and all(isinstance(k, str) and isinstance(v, bool) for k, v in raw.items())
        return ok, dict(raw) if ok else None, "an object of true/false switches"
    if hint is bool:
        return isinstance(raw, bool), raw, "true or false"
    if hint is int:
        return isinstance(raw, int) and not isinstance(raw, bool), raw, "an integer"
    if hint is float:
        ok = isinstance(raw, (int, float)) and not isinstance(raw, bool)
        return ok, float(raw) if ok else None, "a number"
    if hint is str:
        return isinstance(raw, str), raw, "a string"
    return False, None, f"a {hint}"  # a field type this reader does not know: a bug here, not the user's
