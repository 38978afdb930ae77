"""The one dispatch point the engine calls: Triton on CUDA tensors, the torch reference elsewhere.

Every function takes `force=None | "triton" | "torch"`: None picks by device (Triton when
the first tensor is on CUDA and triton imports), "torch" always runs the reference, and
"triton" always runs the kernel (tests use it on CPU tensors under TRITON_INTERPRET=1).
Nothing is decided at import time and no environment variable is read here.
"""

from __future__ import annotations

import torch

from dllm_kernels import canvas_attention as _canvas
from dllm_kernels import commit as _commit
from dllm_kernels import confidence as _conf
from dllm_kernels import context_attention as _prefill
from dllm_kernels import kv_append as _kv
from dllm_kernels import rmsnorm as _rms
from dllm_kernels import rope as _rope
from dllm_kernels import swiglu as _swiglu
from dllm_kernels._triton import HAS_TRITON
from dllm_kernels.confidence import ConfidenceStats
from dllm_kernels.rope import rope_cos_sin

__all__ = [
    "ConfidenceStats", "apply_rope", "canvas_attention", "commit_mask", "confidence_stats",
    "context_attention", "kv_append", "rms_norm", "rope_cos_sin", "swiglu", "use_triton",
]

_CHOICES = (None, "triton", "torch")


def use_triton(t: torch.Tensor, force: str | None = None) -> bool:
    """Whether a call on tensor `t` runs the Triton kernel."""
    if force not in _CHOICES:
        raise ValueError(f"force must be one of {_CHOICES}, got {force!r}")
    if force is not None:
        return force == "triton"
    return HAS_TRITON and t.is_cuda


def rms_norm(x, w, eps: float, residual=None, *, force=None):
    """RMSNorm(x [+ residual]) * w; returns y, or (y, new_residual) when residual is given."""
    fn = _rms.rms_norm_triton if use_triton(x, force) else _rms.rms_norm_reference
    return fn(x, w, eps, residual)


def apply_rope(q, k, cos, sin, *, force=None):
    """Rotate q [B, H, S, D] and k [B, H_kv, S, D] in place; cos/sin [S, D/2], [B, S, D/2] or [B, 1, S, D]."""
    fn = _rope.apply_rope_triton if use_triton(q, force) else _rope.apply_rope_reference
    return fn(q, k, cos, sin)


def swiglu(gate, up=None, *, force=None):
    """silu(gate) * up; with up=None, gate is one [..., 2I] tensor holding [gate | up]."""
    fn = _swiglu.swiglu_triton if use_triton(gate, force) else _swiglu.swiglu_reference
    return fn(gate, up)


def canvas_attention(q, k_ctx, v_ctx, context_lens, k_canvas, v_canvas, scale, canvas_lens=None, *, force=None):
    """Canvas queries [B, H, L, D] over context [B, H_kv, T, D] (rows < context_lens) ++ canvas."""
    fn = _canvas.canvas_attention_triton if use_triton(q, force) else _canvas.canvas_attention_reference
    return fn(q, k_ctx, v_ctx, context_lens, k_canvas, v_canvas, scale, canvas_lens)


def context_attention(q, k_cache, v_cache, q_start, kv_lens, scale, *, force=None):
    """Causal prefill: new queries at cache positions q_start[b] + i over cache rows < kv_lens[b]."""
    fn = _prefill.context_attention_triton if use_triton(q, force) else _prefill.context_attention_reference
    return fn(q, k_cache, v_cache, q_start, kv_lens, scale)


def kv_append(k_cache, v_cache, k_new, v_new, start, new_lens=None, *, force=None):
    """Write new rows [B, H_kv, S, D] into the caches at rows start[b] + i, in place."""
    fn = _kv.kv_append_triton if use_triton(k_cache, force) else _kv.kv_append_reference
    return fn(k_cache, v_cache, k_new, v_new, start, new_lens)


def confidence_stats(logits, temperature=1.0, *, force=None) -> ConfidenceStats:
    """(token, prob, margin, entropy) per row of [N, V] logits.

    temperature: a float, or a float tensor [N] (a per-request [B] over B*L canvas rows:
    `t.repeat_interleave(L)`); <= 0 means greedy, whose statistics are taken at 1.
    """
    fn = _conf.confidence_stats_triton if use_triton(logits, force) else _conf.confidence_stats_reference
    return fn(logits, temperature)


def commit_mask(masked, confidence, threshold, *, force=None):
    """bool [B, L]: masked & (confidence >= threshold), plus each row's best masked slot.

    threshold: a float or a float tensor [B] (per request). No host synchronisation.
    """
    fn = _commit.commit_mask_triton if use_triton(confidence, force) else _commit.commit_mask_reference
    return fn(masked, confidence, threshold)

