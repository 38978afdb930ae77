"""Score existing code token by token: the model's view of what is unlikely.

How a token is scored depends on how the model reads a canvas:
- bidirectional inside the canvas (the diffusion families, the small model, blocks of more
  than one slot): each token is masked once (a `stride`-th of the span per canvas, all
  canvases in one batched pass over the one cached context) and the model's probability of
  the token actually there is read back, with its preferred alternative, given the code on
  both sides;
- causal (a shifted-logit model decoded in blocks of 1: the default model, a pretrained
  left-to-right base): a slot sees only the slots before it, so masking buys nothing; a masked
  token would only hide part of what comes before the ones after it and show the base a mask
  token it never met in pretraining. One causal pass over the span (runner.score_rows) gives
  each token the probability the engine's own fill would give it at that place, given the
  code after the span (the context's suffix) and before the token: a `stride`-th of the rows
  (4x fewer at the default stride; a changed region's scoring p50 428-438 -> 96-97 ms on 2
  cores, benchmarks/bench_scoring.py).

A span longer than WINDOW_TOKENS (MASKED_WINDOW_TOKENS for a model that reads both ways) is
scored in windows of that many tokens, one engine call each (a request's passes run between
them), each window with the span before it in its prefix and, when the model reads both sides,
the span after it in its suffix. A span of up to 4,000 characters (the request's limit; the
language server sends up to 3,000) is 850-1,400 tokens, which a single 512-token limit refused:
the language server, which scored a file's first 3,000 characters when it opened, got no
diagnostics at all for a file longer than ~1,700 characters. The contexts are dropped from the
prefix cache once the span is scored: no completion shares them (their suffix is the code after
the span), and kept, the server's hints filled the cache with them.

A window's context is encoded first, in chunks of CONTEXT_CHUNK tokens, one engine call each,
onto the cached start the chunk before made (prepare.py's way), and only then are its rows
scored. Encoded in the window's one call, the ~1,000 tokens of context around a changed region
held the engine ~1.3 s on a 2-core AMD EPYC, and the keystroke that ended the typist's rest
waited for all of it (the keystroke replay's slowest single-line answers, queued 0.3-1.3 s).
A window after the first extends the context before it (its prefix holds the windows before
it), so only its own tokens are encoded: for a causal model the prefix is trimmed to the
context budget once, for the first window, and later windows keep that start and run past the
budget (_nested_start; trimmed each on its own, they started further on and re-encoded it all).
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import torch

from . import mmap_threshold
from .prepare import PREPARE_CHUNK, encode_in_chunks
from .protocol import ScoreRequest, ScoreResult, TokenScore
from .runner import trim_to_trained

T = TypeVar("T")

# Tokens scored in one engine call: what a request arriving meanwhile waits for at most (~0.2 s
# for the default model on 2 cores, its LM head over every row much of it; 0.4 s at 256, about
# one context chunk's wait now), and the logits a window holds (12 MB in bf16). A causal span's
# windows cost no more for being short: each extends the cached context with its rows' K/V
# (_score_window's `extend`). At 64 each window cost a forward more and bought nothing while a
# context chunk still takes ~0.2 s (bench_scoring.py, thirty-sixth session).
WINDOW_TOKENS = 128
# A model that reads both ways masks a window's tokens and reads the span after it as suffix, so
# each window has a context of its own, encoded whole: fewer, longer windows.
MASKED_WINDOW_TOKENS = 256
# Context tokens encoded in one engine call: what a request arriving meanwhile waits for at
# most (0.11-0.2 s on 2 cores, growing with the context before it), the cursor prepare's chunk.
# Chunks of 64 halved that wait but made a changed region's scoring (~900 context tokens
# encoded anew) ~15% dearer (bench_scoring.py, thirty-sixth session).
CONTEXT_CHUNK = PREPARE_CHUNK
PROBS_ROWS = 64  # rows normalised at a time: float32 copies of 12 MB, not of the whole window's logits
_SPECIALS = 4  # context tokens besides prefix and suffix (bos and the markers), with a margin


def score_span(engine, request: ScoreRequest, call: Callable[[Callable[[], T]], T] | None = None) -> ScoreResult:
    """Score `request.span`; `call(fn)` runs fn where the model may run (Engine.score: on the
    engine thread, between passes), once per window; by default right here."""
    call = call or (lambda fn: fn())
    t0 = time.perf_counter()
    tok = engine.tokenizer
    ids, offsets, prefix_ids, suffix_ids = call(lambda: (*tok.encode_with_offsets(request.span),
                                                          tok.encode(request.prefix), tok.encode(request.suffix)))
    tokens: list[TokenScore] = []
    cache = getattr(engine.runner, "cache", None)
    mark = cache.mark() if hasattr(cache, "mark") else None
    contexts = []  # each window's context as cached: forgotten once the span is scored
    try:
        nested = _nested_start(engine.runner, prefix_ids, suffix_ids, len(ids))
        width = WINDOW_TOKENS if reads_causally(engine.runner) else MASKED_WINDOW_TOKENS
        for a in range(0, len(ids), width):
            b = min(len(ids), a + width)
            if nested is not None:  # each window's context is the one before it and that window's tokens
                start, after = nested
                before, trim = (prefix_ids + ids[:a])[start:], False
            else:
                before, after = _window_context(engine.runner, prefix_ids, ids, suffix_ids, a, b)
                trim = True
            contexts += _encode_in_chunks(engine.runner, before, after, call, trim)
            extend = nested is not None and b < len(ids)  # the next window's context: this one's and its rows
            scored = call(lambda a=a, b=b, before=before, after=after, trim=trim, extend=extend:
                          _score_window(engine, before, after, ids, a, b, request.stride, trim, extend))
            if extend:
                contexts.append(engine.runner.cache_ids((prefix_ids + ids[:b])[nested[0]:], after, trim=False))
            for j, (p_actual, p_best, alternative) in enumerate(scored, start=a):
                start, end = offsets[j]
                tokens.append(TokenScore(start=start, end=end, text=request.span[start:end], prob=p_actual,
                                         alternative=alternative, alternative_prob=p_best))
    finally:
        if mark is not None:  # a one-off context: the language server's hints filled the cache with them
            call(lambda: cache.forget_since(mark, prefixes_of=contexts))
    return ScoreResult(request.request_id, tokens, engine.model_name, (time.perf_counter() - t0) * 1000)


def reads_causally(runner) -> bool:
    """A shifted-logit model decoded in blocks of 1: each canvas row sees only the rows before it."""
    return bool(getattr(runner, "shifted", False)) and getattr(runner, "block", 0) == 1 and hasattr(runner, "score_rows")


def _window_context(runner, prefix_ids: list[int], ids: list[int], suffix_ids: list[int], a: int,
                    b: int) -> tuple[list[int], list[int]]:
    """The prefix and suffix tokens window ids[a:b] is scored after: the span before it joins
    the prefix and, when the model reads both sides, the span after it the suffix."""
    after = suffix_ids if reads_causally(runner) else ids[b:] + suffix_ids  # a causal row never sees the span after it
    before = prefix_ids + ids[:a]
    budget = max(0, runner.window - (b - a) - _SPECIALS)
    if len(before) + len(after) > budget:  # the span around the window moved into the context: keep what fits
        before, after = trim_to_trained(before, after, budget)
    return before, after


def _nested_start(runner, prefix_ids: list[int], suffix_ids: list[int], span: int) -> tuple[int, list[int]] | None:
    """(where the prefix starts, the suffix kept) for every window of a causal span: the first
    window's context as a request there would have it (trimmed to the model's context budget,
    `context_tokens`), each later window's the same start with the span before it appended, past
    the budget where it must be, inside the model's window. None where that does not fit or the
    model does not read causally (then each window is trimmed to the budget on its own).

    Why: a later window's context trimmed on its own starts WINDOW_TOKENS further on, so the
    cache served it nothing past the suffix and its whole context was encoded again (a 1,500-
    character span 1,600 tokens into a file: 2.6 s, ~1 s of it encoding contexts already read).
    A pretrained base's budget is a request's latency, not what it can read (bases/catalog.py)."""
    if not reads_causally(runner):
        return None
    budget = runner.config.extra.get("context_tokens")
    if not budget:
        return None
    kept, after = trim_to_trained(prefix_ids, suffix_ids, int(budget) - 2)  # as runner._context_ids trims
    if len(kept) + span + len(after) + _SPECIALS > runner.window:
        return None
    return len(prefix_ids) - len(kept), after


def _encode_in_chunks(runner, before: list[int], after: list[int], call, trim: bool = True) -> list[torch.Tensor]:
    """Encode a window's context into the prefix cache CONTEXT_CHUNK tokens per engine call
    (`call`), each chunk onto the one before; the context's cached tokens, or nothing where the
    runner keeps no exact context cache (a bidirectional family encodes with the canvas).
    `trim`: as runner.encode_context's."""
    if not hasattr(runner, "encode_tokens"):
        return []
    ids = call(lambda: runner.cache_ids(before, after, trim))
    encode_in_chunks(runner, ids, call, CONTEXT_CHUNK)
    return [ids]


@torch.inference_mode()
def _score_window(engine, before: list[int], after: list[int], ids: list[int], a: int, b: int,
                  stride: int, trim: bool = True, extend: bool = False) -> list[tuple[float, float, str]]:
    """(probability of the token there, the best token's probability, the best token's text) for
    ids[a:b], after the context `before` and `after` (_window_context, or _nested_start's with
    `trim` False). `extend`: the rows' K/V extend the context in the cache (runner.score_rows),
    so the next window's context is there without encoding these tokens again."""
    runner, special = engine.runner, engine.special
    causal = reads_causally(runner)
    n = b - a
    # (a family runner, whose windows never nest, takes no `trim`)
    ctx = runner.encode_context(before, after, n) if trim else runner.encode_context(before, after, n, trim=False)
    span = torch.tensor(ids[a:b], device=runner.device)
    # A window's rows and their logits are blocks of megabytes, all freed when it ends: from
    # the arena, not each its own mmap, as a context's encoding (mmap_threshold.py).
    with mmap_threshold.raised():
        if causal:
            logits = runner.score_rows([ctx], span[None], torch.tensor([n], device=runner.device), extend=extend)[0]
        else:
            logits = _masked_logits(runner, ctx, span, min(stride, n), special.mask)
    out = []
    banned = list(special.banned)
    for r in range(0, n, PROBS_ROWS):
        rows = logits[r:r + PROBS_ROWS].float()
        rows[:, banned] = float("-inf")
        probs = rows.softmax(-1)
        p_actual = probs[torch.arange(probs.shape[0], device=probs.device), span[r:r + PROBS_ROWS]]
        p_best, best = probs.max(-1)
        out += [(float(p), float(q), engine.tokenizer.decode([int(t)]))
                for p, q, t in zip(p_actual.tolist(), p_best.tolist(), best.tolist())]
    return out


def _masked_logits(runner, ctx, span: torch.Tensor, stride: int, mask_id: int) -> torch.Tensor:
    """[n, V]: slot j's logits from the canvas that masks it (canvas r masks the slots j with
    j % stride == r), all `stride` canvases in one batched pass."""
    n = span.numel()
    slot = torch.arange(n, device=span.device)
    canvases = span.repeat(stride, 1)  # [stride, n]
    masked = (slot[None] % stride) == torch.arange(stride, device=span.device)[:, None]
    canvases[masked] = mask_id
    lens = torch.full((stride,), n, device=span.device)
    logits = runner.canvas_logits([ctx] * stride, canvases, lens, rows=masked)
    runner.forget_batch()
    return logits[slot % stride, slot]  # before any softmax: [n, V], not [stride, n, V]
