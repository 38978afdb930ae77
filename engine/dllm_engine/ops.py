"""The engine's one dispatch point for the hot-path ops.

On CUDA with Triton available the kernels in `dllm_kernels` run; everywhere
else the plain-torch path does. The choice is made per call from the tensor's
device, or forced by `EngineConfig.kernels` ("triton" / "torch") through the
model, never from environment variables at import time.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from dllm_kernels import dispatch as kernels

from .attention_buckets import bucket_mask, pad_attention
from .row_buckets import bucket_rows, needs_buckets

Force = str | None  # None: by device; "triton" or "torch": forced

# A mask argument meaning "causal, the keys are exactly the queries" (a context encoded from its
# first token): attention runs SDPA's is_causal, which skips the blocks above the diagonal
# instead of reading an explicit [S, S] mask: the same numbers, a layer's attention 19.8 -> 13.9 ms
# at 1,024 tokens on a 2-core CPU, a whole 1,000-token encode 0.85-0.87x (bench_context_encode.py).
CAUSAL = "causal"


@dataclass(frozen=True)
class CanvasSpec:
    """Describes a canvas pass so the fused canvas-attention kernel can replace masked SDPA."""

    context_lens: torch.Tensor  # [B] rows of the context buffer that are real
    canvas_lens: torch.Tensor  # [B] canvas slots that are real


def use_triton(x: torch.Tensor, force: Force = None) -> bool:
    return kernels.use_triton(x, force)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, force: Force = None) -> torch.Tensor:
    if kernels.use_triton(x, force):
        return kernels.rms_norm(x, weight, eps, force="triton")
    if x.dtype == weight.dtype:
        # torch's own op computes in float32 and scales by the weight before rounding, as
        # below (bit for bit the same here), in one call instead of nine: a decoding pass
        # of a 30-layer base on a CPU runs 61 norms of a few rows, bound by per-op overhead.
        return torch.rms_norm(x, (x.shape[-1],), weight, eps)
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * weight.float()).to(x.dtype)


def swiglu(gate: torch.Tensor, up: torch.Tensor | None, force: Force = None) -> torch.Tensor:
    """silu(gate) * up; with up=None, `gate` is the fused [..., 2I] projection [gate | up]."""
    if kernels.use_triton(gate, force):
        return kernels.swiglu(gate, up, force="triton")
    if up is None:
        gate, up = gate.chunk(2, dim=-1)
    return F.silu(gate) * up


def rope_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            force: Force = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half RoPE. q [B, H, S, D], k [B, Hkv, S, D]; cos/sin [B, 1, S, D] gathered by position."""
    if kernels.use_triton(q, force):
        q, k = q.contiguous(), k.contiguous()
        half = q.shape[-1] // 2
        return kernels.apply_rope(q, k, cos[:, 0, :, :half].float(), sin[:, 0, :, :half].float(), force="triton")
    sin = _signed_sin(sin)
    return _rope(q, cos, sin), _rope(k, cos, sin)


def rope_fused_qk(qk: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half RoPE of q and k together, straight from a fused projection's output:
    `qk` [B, S, H + Hkv, D] (q's heads, then k's), cos/sin [B, 1, S, D]. Returns q
    [B, H, S, D] and k [B, Hkv, S, D] as transposed views. The same numbers as rope_qk
    (float32 products of the same operands), in one set of ops instead of two and with no
    copy of q and k before it: on a CPU a small decoding pass is bound by per-op overhead."""
    out = _rope(qk, cos.transpose(1, 2), _signed_sin(sin).transpose(1, 2))
    q, k = out.split((heads, qk.shape[2] - heads), dim=2)
    return q.transpose(1, 2), k.transpose(1, 2)


def _rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin in float32, rounded to x's dtype, with rotate_half's sign
    carried by `signed_sin` (_signed_sin): the same products, exactly negated, so a layer
    converts x once and runs no negation."""
    half = x.shape[-1] // 2
    xf = x.float()
    return (xf * cos + torch.cat((xf[..., half:], xf[..., :half]), dim=-1) * signed_sin).to(x.dtype)


def _signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin with its first half negated (rotate_half's sign), made once a forward."""
    half = sin.shape[-1] // 2
    return _per_forward("sin", sin, half, lambda: torch.cat((-sin[..., :half], sin[..., half:]), dim=-1))


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool attention mask (True = may attend) as the additive one SDPA makes of it
    (0 or -inf in the query's dtype): made once per forward instead of once per layer."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              keys: int | None = None) -> torch.Tensor:
    """q [B, H, S, D], k/v [B, Hkv, T, D], mask bool [B|1, 1, S|1, T] (True = may attend).
    `keys`: k/v are a preallocated buffer holding the T = `keys` keys in front, finite values
    after them (attention_buckets.pad_attention pads with its rows instead of copying).
    `mask` CAUSAL: q, k and v are the same rows, each sees itself and the rows before it."""
    if isinstance(mask, str):
        return _causal_attention(q, k, v)
    if needs_buckets(q):  # CPU bf16/fp16: a bounded set of kernel shapes
        s, t = q.shape[-2], keys if keys is not None else k.shape[-2]
        padded = _per_forward("bucket", mask, (s, t), lambda: bucket_mask(mask, s, t, q.device))
        return _attention(*pad_attention(q, k, v, mask, keys, padded))[:, :, :s]
    if keys is not None:
        k, v = k[:, :, :keys], v[:, :, :keys]
    return _attention(q, k, v, mask)


_forward = threading.local()


@contextlib.contextmanager
def masks_shared_by_layers():
    """Within it (one model forward on this thread), what attention() derives from a mask (its
    bucket padding, its rows repeated per query head of a group) is made once and reused by
    every layer that passes the same mask: they all do, so a 30-layer pass made each 30 times
    (~1 ms of a ~20 ms CPU decoding pass; benchmarks/RESULTS.md, thirty-fifth session).
    Scoped to the forward, so a mask edited in place between forwards is never stale."""
    outer = getattr(_forward, "memo", None)
    _forward.memo = {}
    try:
        yield
    finally:
        _forward.memo = outer


def _per_forward(what: str, mask: torch.Tensor | None, key, make):
    """make(), or within masks_shared_by_layers() the value made for this same mask object and
    key earlier in the forward (the memo holds the mask, so its identity cannot be reused)."""
    memo = getattr(_forward, "memo", None)
    if memo is None or mask is None:
        return make()
    hit = memo.get((what, id(mask)))  # per object: Gemma's local and global ropes alternate by layer
    if hit is not None and hit[0] is mask and hit[1] == key:
        return hit[2]
    value = make()
    memo[what, id(mask)] = (mask, key, value)
    return value


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    s = q.shape[-2]
    pad = bucket_rows(s) - s if needs_buckets(q) else 0  # a bounded set of kernel shapes (attention_buckets.py)
    if pad:  # the padded rows come last: under a causal mask no real row sees them; their output is dropped
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])
    return out[:, :, :s] if pad else out


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    b, h, s, d = q.shape
    hkv = k.shape[1]
    if h != hkv and (mask is None or mask.shape[-2] == 1):
        # A mask shared by every query (a canvas pass): fold each KV head's query group into
        # the query axis, so SDPA runs plain multi-head attention over Hkv heads without
        # expanding k/v to H heads (~15% of a canvas pass's attention on a CPU).
        out = F.scaled_dot_product_attention(q.reshape(b, hkv, (h // hkv) * s, d), k, v, attn_mask=mask)
        return out.view(b, h, s, d)
    if h != hkv and q.device.type == "cpu" and mask.shape[1] == 1:
        # A mask per query row (a decoding pass's held-out token and drafts, causal among
        # themselves): fold the same way, each row's mask repeated for every query head of the
        # group (the folded rows run head by head, then row). torch's CPU flash attention with
        # enable_gqa took ~150 us a layer over 1,024 cached keys and 4 rows, folded ~100 us, the
        # same numbers bit for bit (Sapphire Rapids, 2 threads; benchmarks/RESULTS.md). CUDA keeps
        # enable_gqa: its kernels were not measured this way.
        group = h // hkv
        grouped = _per_forward("group", mask, group, lambda: mask.repeat(1, 1, group, 1))
        out = F.scaled_dot_product_attention(q.reshape(b, hkv, group * s, d), k, v, attn_mask=grouped)
        return out.view(b, h, s, d)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=h != hkv)


def canvas_attention(q, k_ctx, v_ctx, k_canvas, v_canvas, spec: CanvasSpec, force: Force = None):
    """Canvas queries over [context ++ canvas] with the fused kernel (no concatenation)."""
    scale = q.shape[-1] ** -0.5
    return kernels.canvas_attention(q, k_ctx, v_ctx, spec.context_lens, k_canvas, v_canvas, scale,
                                    spec.canvas_lens, force=force)


def use_fused_canvas(q: torch.Tensor, force: Force) -> bool:
    return kernels.use_triton(q, force)
