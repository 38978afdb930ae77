"""Rotary position embedding applied to q and k in place (rotate-half, Llama/Qwen convention).

With x = [x1 | x2] split at D/2 and (cos, sin) for the token's position:

    x1' = x1 * cos - x2 * sin
    x2' = x2 * cos + x1 * sin

q is [B, H, S, D] and k is [B, H_kv, S, D] (any strides, e.g. transposed projections);
cos/sin are [S, D/2] (shared by the batch) or [B, S, D/2] (per-request positions, from
`rope_cos_sin(positions, D, theta)`), or Hugging Face's [B, 1, S, D]. One program rotates
every head of q and k at one (b, s), so cos/sin are read once per token.
"""

from __future__ import annotations

import torch

from dllm_kernels._triton import check_device, require_triton, tl, triton


@triton.jit
def _rotate_heads(x_ptr, sb, sh, ss, b, s, n_heads, c, sn, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    """Rotate x[b, :n_heads, s, :] in place with c = cos, sn = sin (both [HALF], float32)."""
    heads = tl.arange(0, BLOCK_H)
    d = tl.arange(0, HALF)
    base = x_ptr + b * sb + s * ss
    for h0 in range(0, n_heads, BLOCK_H):
        hh = h0 + heads
        mask = (hh < n_heads)[:, None]
        p1 = base + hh[:, None] * sh + d[None, :]  # first half (unit stride along D)
        x1 = tl.load(p1, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(p1 + HALF, mask=mask, other=0.0).to(tl.float32)
        y1 = x1 * c[None, :] - x2 * sn[None, :]
        y2 = x2 * c[None, :] + x1 * sn[None, :]
        tl.store(p1, y1.to(x_ptr.dtype.element_ty), mask=mask)
        tl.store(p1 + HALF, y2.to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kernel(
    q_ptr, k_ptr, cos_ptr, sin_ptr,
    sqb, sqh, sqs, skb, skh, sks, scb, scs, ssb, sss,
    S, HQ, HK,
    HALF: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Grid (B * S,): one token position, all q heads then all k heads."""
    pid = tl.program_id(0)
    b = (pid // S).to(tl.int64)
    s = (pid % S).to(tl.int64)
    # -- cos/sin for this position: read once, reused by every head --
    d = tl.arange(0, HALF)
    c = tl.load(cos_ptr + b * scb + s * scs + d).to(tl.float32)
    sn = tl.load(sin_ptr + b * ssb + s * sss + d).to(tl.float32)
    _rotate_heads(q_ptr, sqb, sqh, sqs, b, s, HQ, c, sn, HALF, BLOCK_H)
    _rotate_heads(k_ptr, skb, skh, sks, b, s, HK, c, sn, HALF, BLOCK_H)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float = 10000.0):
    """cos, sin of shape [*positions.shape, head_dim/2] in float32 for integer positions."""
    if head_dim % 2:
        raise ValueError(f"rope: head_dim must be even, got {head_dim}")
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    angles = positions.to(torch.float32)[..., None] * inv_freq  # [..., D/2]
    return angles.cos(), angles.sin()


def _batched(t: torch.Tensor, batch: int) -> torch.Tensor:
    """cos/sin as [B, S, D/2] views: [S, D/2] gets a stride-0 batch dim; Hugging Face's
    [B, 1, S, D] tables (both halves equal) are cut to their first half."""
    if t.dim() == 4:
        return t[:, 0, :, : t.shape[-1] // 2]
    return t.unsqueeze(0).expand(batch, *t.shape) if t.dim() == 2 else t


def apply_rope_reference(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Plain torch, in place on q and k; returns (q, k)."""
    for x in (q, k):
        c = _batched(cos, x.shape[0])[:, None].float()  # [B, 1, S, D/2]
        s = _batched(sin, x.shape[0])[:, None].float()
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        y = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        x.copy_(y.to(x.dtype))
    return q, k


def apply_rope_triton(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Triton launcher, in place on q and k; returns (q, k)."""
    require_triton("apply_rope")
    check_device("apply_rope", q, k, cos, sin)
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(f"apply_rope: q and k must be [B, H, S, D], got {tuple(q.shape)} and {tuple(k.shape)}")
    bsz, hq, seq, dim = q.shape
    if k.shape[0] != bsz or k.shape[2:] != (seq, dim) or k.dtype != q.dtype:
        raise ValueError(f"apply_rope: k {tuple(k.shape)}/{k.dtype} does not match q {tuple(q.shape)}/{q.dtype}")
    half = dim // 2
    if dim % 2 or half & (half - 1) or half < 1:
        raise ValueError(f"apply_rope: head_dim must be twice a power of two, got {dim}")
    if q.stride(-1) != 1 or k.stride(-1) != 1:
        raise ValueError("apply_rope: q and k need unit stride along head_dim (rotated in place)")
    cos, sin = _batched(cos, bsz), _batched(sin, bsz)
    if cos.dim() == 3 and cos.shape[0] == 1 and sin.shape[0] == 1:  # one table for the batch
        cos, sin = cos.expand(bsz, *cos.shape[1:]), sin.expand(bsz, *sin.shape[1:])
    if cos.shape != (bsz, seq, half) or sin.shape != cos.shape:
        raise ValueError(
            f"apply_rope: cos/sin must be [S, D/2], [B, S, D/2] or [B, 1, S, D] for (B, S, D/2) = "
            f"{(bsz, seq, half)}, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if cos.stride(-1) != 1 or sin.stride(-1) != 1:
        cos, sin = cos.contiguous(), sin.contiguous()
    if bsz * seq == 0:
        return q, k
    block_h = min(16, triton.next_power_of_2(max(hq, k.shape[1])))
    _rope_kernel[(bsz * seq,)](
        q, k, cos, sin,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        cos.stride(0), cos.stride(1), sin.stride(0), sin.stride(1),
        seq, hq, k.shape[1],
        HALF=half, BLOCK_H=block_h, num_warps=4,
    )
    return q, k
