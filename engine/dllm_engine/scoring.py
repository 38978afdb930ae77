"""Score existing code token by token: the diffusion model's view of what is unlikely.

Each token of the span is masked once (a `stride`-th of the span per canvas,
all canvases in one batched pass over the one cached context) and the model's
probability of the token actually there is read back, with its preferred
alternative. No autoregressive server can do this with the code after the
span as context.
"""

from __future__ import annotations

import time

import torch

from .protocol import ProtocolError, ScoreRequest, ScoreResult, TokenScore

MAX_SPAN_TOKENS = 512


@torch.inference_mode()
def score_span(engine, request: ScoreRequest) -> ScoreResult:
    t0 = time.perf_counter()
    tok, special = engine.tokenizer, engine.special
    ids, offsets = tok.encode_with_offsets(request.span)
    if len(ids) > MAX_SPAN_TOKENS:
        raise ProtocolError(f"span has {len(ids)} tokens; at most {MAX_SPAN_TOKENS} can be scored at once")
    if not ids:
        return ScoreResult(request.request_id, [], engine.model_name, 0.0)
    runner = engine.runner
    ctx = runner.encode_context(tok.encode(request.prefix), tok.encode(request.suffix), len(ids))
    span = torch.tensor(ids, device=runner.device)
    stride = min(request.stride, len(ids))
    slot = torch.arange(len(ids), device=runner.device)
    canvases = span.repeat(stride, 1)  # [stride, n]: canvas r masks the slots j with j % stride == r
    masked = (slot[None] % stride) == torch.arange(stride, device=runner.device)[:, None]
    canvases[masked] = special.mask
    lens = torch.full((stride,), len(ids), device=runner.device)
    logits = runner.canvas_logits([ctx] * stride, canvases, lens, rows=masked).float()
    runner.forget_batch()
    logits[..., list(special.banned)] = float("-inf")
    probs = logits.softmax(-1)
    owner = slot % stride  # which canvas scored slot j
    p_slot = probs[owner, slot]  # [n, V]
    p_actual = p_slot[slot, span]
    p_best, best = p_slot.max(-1)
    tokens = []
    for j, (start, end) in enumerate(offsets):
        tokens.append(TokenScore(
            start=start, end=end, text=request.span[start:end], prob=float(p_actual[j]),
            alternative=tok.decode([int(best[j])]), alternative_prob=float(p_best[j]),
        ))
    return ScoreResult(request.request_id, tokens, engine.model_name, (time.perf_counter() - t0) * 1000)
