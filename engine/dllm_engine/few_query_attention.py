"""Attention for a decoding pass's few query rows over a long cached context, on a CPU in bf16.

Why: a pass of a pretrained base decoded in blocks of 1 runs 1 to 8 query rows per layer
against a context of a thousand tokens and more. torch's CPU flash attention (what
`F.scaled_dot_product_attention` runs in bf16) tiles the queries and keys for long
sequences; with grouped-query heads and a few rows it spent 0.45-1 ms a layer at 1,024-2,048
keys on a 2-core EPYC, where two matrix products and a softmax over the same numbers took
0.28-0.34 ms (benchmarks/RESULTS.md, thirteenth session). The products below fold each
key-value head's query group into one matrix (no k/v expanded to every head), compute the
scores and the softmax in float32, and multiply the probabilities back in the model's dtype.
The same attention; only the rounding of the bf16 products differs.

Used only where it measured faster: half-precision CPU tensors, at most FEW_ROWS query rows
per key-value head, at least LONG_KEYS keys (a short context stays on the flash kernel).
The key count is already one of attention_buckets.py's buckets here, so the set of product
shapes stays bounded (oneDNN keeps one kernel per shape).
"""

from __future__ import annotations

import torch

FEW_ROWS = 72  # query heads per key-value head x query rows, folded into one product
LONG_KEYS = 1024


def applies(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether this path is the faster one for q [B, H, S, D] over k [B, Hkv, T, D]."""
    b, h, s, _ = q.shape
    return (q.device.type == "cpu" and q.dtype in (torch.bfloat16, torch.float16)
            and h % k.shape[1] == 0 and (h // k.shape[1]) * s <= FEW_ROWS and k.shape[-2] >= LONG_KEYS)


def few_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(q k^T / sqrt(D) + mask) v for q [B, H, S, D], k/v [B, Hkv, T, D], an additive
    mask [B|1, 1, S|1, T] (0 / -inf) or None; [B, H, S, D] in q's dtype."""
    b, h, s, d = q.shape
    hkv, t = k.shape[1], k.shape[-2]
    g = h // hkv  # query heads sharing one key-value head: q's heads are grouped in order
    scores = torch.matmul(q.reshape(b, hkv, g * s, d), k.transpose(-1, -2)).view(b, hkv, g, s, t)
    scores = scores.float().mul_(d ** -0.5)
    if mask is not None:
        scores = scores.add_(mask[:, :, None].float()) if mask.dtype != torch.bool else \
            scores.masked_fill_(~mask[:, :, None], float("-inf"))
    probs = scores.softmax(-1).to(q.dtype)
    return torch.matmul(probs.view(b, hkv, g * s, t), v).view(b, h, s, d)
