"""The engine's one dispatch point for the hot-path ops.

On CUDA with Triton available the kernels in `dllm_kernels` run; everywhere
else the plain-torch references do. The choice is made per call from the
tensor's device, never from environment variables at import time.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:  # dllm_kernels imports triton lazily; its dispatch falls back to torch itself
    from dllm_kernels import dispatch as _kernels
except ImportError:  # pragma: no cover - the kernels package is part of this distribution
    _kernels = None


def _use_kernels(t: torch.Tensor) -> bool:
    return _kernels is not None and t.is_cuda


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if _use_kernels(x):
        return _kernels.rms_norm(x, weight, eps)
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * weight.float()).to(x.dtype)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    if _use_kernels(gate):
        return _kernels.swiglu(gate, up)
    return F.silu(gate) * up


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE. x [B, H, S, D]; cos/sin [B, 1, S, D] (already gathered by position)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """q [B, H, S, D], k/v [B, Hkv, T, D], mask bool [B|1, 1, S, T] (True = may attend)."""
    gqa = q.shape[1] != k.shape[1]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
