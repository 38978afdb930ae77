"""Confidence statistics of each position's logits in one pass, and the on-device commit rule.

For a row of logits x over the vocabulary and temperature t (t <= 0 means greedy: the
statistics are taken at t = 1, the argmax is the same), with z = x / t, p = softmax(z):

    token   = argmax z                  (first index on ties, as torch.argmax)
    prob    = p[token]   = 1 / S                with S = sum exp(z - m), m = max z
    margin  = p1 - p2    = (1 - exp(m2 - m)) / S     m2 = second largest z (a tie gives 0)
    entropy = -sum p log p = m + log S - sum(exp(z - m) * z) / S

The kernel streams the row once in chunks, keeping (m, m2, S, sum exp(z-m)*z) online and
rescaling them when the max grows, so the softmax is never materialised. -inf logits
(banned tokens) contribute nothing; a row of only -inf logits has no distribution (nan/inf).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from dllm_kernels._triton import check_device, require_triton, tl, triton

LOG2E = 1.4426950408889634  # 1/ln 2: exp(x) = exp2(x * LOG2E)


class ConfidenceStats(NamedTuple):
    token: torch.Tensor  # int64 [N]
    prob: torch.Tensor  # float32 [N]
    margin: torch.Tensor  # float32 [N]
    entropy: torch.Tensor  # float32 [N], natural log


@triton.jit
def _confidence_kernel(
    x_ptr, t_ptr, tok_ptr, prob_ptr, margin_ptr, ent_ptr,
    stride_x, V,
    BLOCK_V: tl.constexpr,
):
    """One row of logits per program; see the module docstring for the formulas.

    Every lane keeps its own running (max, second max, argmax, sum e, sum e*z) over the
    chunks it sees, so the loop has no cross-warp reductions; lanes merge once at the end.
    """
    row = tl.program_id(0).to(tl.int64)
    t = tl.load(t_ptr + row)
    inv_t = 1.0 / tl.where(t > 0, t, 1.0)
    lanes = tl.arange(0, BLOCK_V)
    neg_inf = float("-inf")
    m1 = tl.full([BLOCK_V], neg_inf, tl.float32)  # per-lane max
    m2 = tl.full([BLOCK_V], neg_inf, tl.float32)  # per-lane second max
    arg = tl.zeros([BLOCK_V], tl.int32)  # per-lane argmax (first index: updates are strict)
    s = tl.zeros([BLOCK_V], tl.float32)  # per-lane sum exp(z - m1)
    sz = tl.zeros([BLOCK_V], tl.float32)  # per-lane sum exp(z - m1) * z
    for v0 in range(0, V, BLOCK_V):
        idx = v0 + lanes
        z = tl.load(x_ptr + row * stride_x + idx, mask=idx < V, other=neg_inf).to(tl.float32) * inv_t
        # -- top-2 and argmax, per lane --
        bigger = z > m1
        m2 = tl.where(bigger, m1, tl.maximum(m2, z))
        arg = tl.where(bigger, idx, arg)
        m_new = tl.maximum(m1, z)
        # -- rescale this lane's sums to its new max (a lane that saw only -inf has none) --
        m_safe = tl.where(m_new == neg_inf, 0.0, m_new)
        alpha = tl.exp2((m1 - m_safe) * 1.4426950408889634)  # 1/ln 2
        e = tl.exp2((z - m_safe) * 1.4426950408889634)
        s = s * alpha + e
        sz = sz * alpha + e * tl.where(e > 0, z, 0.0)  # 0 * -inf would be nan
        m1 = m_new
    # -- merge the lanes --
    m = tl.max(m1, axis=0)
    tok = tl.min(tl.where(m1 == m, arg, V), axis=0)  # first index among the lanes holding the max
    second = tl.maximum(tl.max(tl.where(arg == tok, neg_inf, m1), axis=0), tl.max(m2, axis=0))
    w = tl.exp2((m1 - tl.where(m == neg_inf, 0.0, m)) * 1.4426950408889634)
    total = tl.sum(s * w, axis=0)
    total_z = tl.sum(sz * w, axis=0)
    prob = 1.0 / total
    p2 = tl.where(second == neg_inf, 0.0, tl.exp2((second - m) * 1.4426950408889634)) / total
    tl.store(tok_ptr + row, tok.to(tl.int64))
    tl.store(prob_ptr + row, prob)
    tl.store(margin_ptr + row, prob - p2)
    tl.store(ent_ptr + row, m + tl.log(total) - total_z / total)


def _temperatures(temperature, n: int, device) -> torch.Tensor:
    """Per-row temperatures as float32 [N] (a float applies to every row)."""
    if isinstance(temperature, torch.Tensor):
        t = temperature.to(device=device, dtype=torch.float32).reshape(-1)
        if t.numel() == 1:
            return t.expand(n).contiguous()
        if t.numel() != n:
            raise ValueError(f"confidence_stats: {t.numel()} temperatures for {n} rows")
        return t.contiguous()
    return torch.full((n,), float(temperature), dtype=torch.float32, device=device)


def confidence_stats_reference(logits: torch.Tensor, temperature=1.0) -> ConfidenceStats:
    """Plain torch over [N, V] logits (materialises the softmax)."""
    t = _temperatures(temperature, logits.shape[0], logits.device)
    z = logits.float() / torch.where(t > 0, t, torch.ones_like(t))[:, None]
    p = torch.softmax(z, dim=-1)
    top = torch.topk(p, k=min(2, p.shape[-1]), dim=-1).values
    p2 = top[:, 1] if top.shape[-1] > 1 else torch.zeros_like(top[:, 0])
    token = torch.argmax(z, dim=-1)
    prob = p.gather(-1, token[:, None])[:, 0]
    return ConfidenceStats(token, prob, prob - p2, torch.special.entr(p).sum(-1))


def confidence_stats_triton(logits: torch.Tensor, temperature=1.0, block_v: int | None = None) -> ConfidenceStats:
    """Triton launcher; same contract as `confidence_stats_reference`."""
    require_triton("confidence_stats")
    if logits.dim() != 2 or not logits.is_floating_point():
        raise ValueError(f"confidence_stats: logits must be floating [N, V], got {tuple(logits.shape)}/{logits.dtype}")
    n, vocab = logits.shape
    if vocab == 0:
        raise ValueError("confidence_stats: empty vocabulary")
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    t = _temperatures(temperature, n, logits.device)
    check_device("confidence_stats", logits, t)
    dev = logits.device
    out = ConfidenceStats(
        torch.empty(n, dtype=torch.int64, device=dev),
        torch.empty(n, dtype=torch.float32, device=dev),
        torch.empty(n, dtype=torch.float32, device=dev),
        torch.empty(n, dtype=torch.float32, device=dev),
    )
    if n:
        block_v = block_v or min(2048, triton.next_power_of_2(vocab))
        _confidence_kernel[(n,)](
            logits, t, *out, logits.stride(0), vocab,
            BLOCK_V=block_v, num_warps=8 if block_v >= 2048 else 4,  # 8 elements a thread
        )
    return out
