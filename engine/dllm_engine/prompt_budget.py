"""A prompt far over the model's window is refused, or trimmed on request, before it is tokenized.

The engine tokenizes a hole's prefix and suffix on its own thread at admission and only
then finds a context too long for the window; a 100 MB prompt was tokenized whole first
(issue 16, defect 4). No token covers more characters than the vocabulary's longest
entry, so text longer than `window * longest` characters cannot fit, whatever it holds:
that check costs a `len()`. Over HTTP it answers 400, naming the window.

A client that would rather have the text nearest the hole than an error sets
`?trim_context=true` on /v1/infill or /v1/completions: the prefix keeps its end, the
suffix its start (a quarter of the room at most), cut at token boundaries so that the
context and the fill fit the window. The language server cuts its own windows first.
"""

from __future__ import annotations

from dataclasses import replace

from .protocol import InfillRequest, ProtocolError

TRIM_PARAM = "trim_context"
_ROOM_MARGIN = 16  # tokens left for the specials and healing around the context


def wants_trim(query_value: str | None) -> bool:
    return (query_value or "").lower() in ("1", "true", "yes")


def fit_request(request: InfillRequest, tokenizer, window: int | None, trim: bool) -> InfillRequest:
    """The request with every hole inside the window (trimmed when `trim`), or ProtocolError."""
    if window is None or not hasattr(tokenizer, "longest_token_chars"):
        return request  # a runner without a fixed window, or a tokenizer we cannot bound: the engine checks
    longest = tokenizer.longest_token_chars()
    holes = []
    for i, hole in enumerate(request.holes):
        chars = len(hole.prefix) + len(hole.suffix)
        if not trim:
            if chars > window * longest:
                raise ProtocolError(
                    f"hole {i}: prefix and suffix hold {chars:,} characters, more than the model's window of "
                    f"{window} tokens can hold (a token covers at most {longest} characters); cut them to a "
                    f"budget, or add ?{TRIM_PARAM}=true to keep the text nearest the hole")
            holes.append(hole)
            continue
        room = window - hole.max_tokens - _ROOM_MARGIN
        if room <= 0:
            raise ProtocolError(f"hole {i}: max_tokens {hole.max_tokens} leaves no room for context in the "
                                f"model's window of {window} tokens")
        # Characters first (cheap), so that only a bounded text is tokenized.
        prefix = hole.prefix[-room * longest:]
        suffix = hole.suffix[:(room // 4) * longest]
        suffix = _head(tokenizer, suffix, room // 4)
        prefix = _tail(tokenizer, prefix, room - _token_count(tokenizer, suffix))
        holes.append(replace(hole, prefix=prefix, suffix=suffix))
    return replace(request, holes=holes)


def _token_count(tokenizer, text: str) -> int:
    return len(tokenizer.encode(text)) if text else 0


def _head(tokenizer, text: str, tokens: int) -> str:
    """The longest start of `text` of at most `tokens` tokens, cut where a token starts."""
    if not text:
        return text
    ids, offsets = tokenizer.encode_with_offsets(text)
    return text if len(ids) <= tokens else text[:offsets[tokens][0]]


def _tail(tokenizer, text: str, tokens: int) -> str:
    """The longest end of `text` of at most `tokens` tokens, cut where a token starts."""
    if not text or tokens <= 0:
        return "" if tokens <= 0 else text
    ids, offsets = tokenizer.encode_with_offsets(text)
    return text if len(ids) <= tokens else text[offsets[len(ids) - tokens][0]:]
