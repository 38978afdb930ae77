"""Causal attention for context encoding (prefill) in the canvas_attention cache layout.

The new tokens of request b are already appended to its cache rows [q_start[b], ...);
query i sits at cache position q_start[b] + i and sees cache rows j < kv_lens[b] with
j <= q_start[b] + i. q is [B, H, S, D] (padded to S), the caches [B, H_kv, T, D]. With
q_start = 0 and kv_lens = S this is plain causal self-attention; with a prefix-cache hit,
only the tail after the reused prefix is encoded.
"""

from __future__ import annotations

import torch

from dllm_kernels._attention_kernel import check_qkv, int_lens, launch, sdpa_masked
from dllm_kernels._triton import check_device, require_triton


def context_attention_reference(q, k_cache, v_cache, q_start, kv_lens, scale):
    """Causal prefill: query i of request b at position q_start[b] + i over cache rows < kv_lens[b]."""
    S, T = q.shape[2], k_cache.shape[2]
    dev = q.device
    pos = q_start.to(dev)[:, None] + torch.arange(S, device=dev)[None, :]  # [B, S]
    j = torch.arange(T, device=dev)
    mask = (j[None, None, :] <= pos[:, :, None]) & (j[None, None, :] < kv_lens.to(dev)[:, None, None])
    return sdpa_masked(q, k_cache, v_cache, mask[:, None], scale)


def context_attention_triton(q, k_cache, v_cache, q_start, kv_lens, scale, block_m=None, block_n=None):
    """Triton launcher; same contract as `context_attention_reference`. Returns [B, H, S, D]."""
    op = "context_attention"
    require_triton(op)
    group = check_qkv(op, q, (("cache", k_cache, v_cache),))
    bsz = q.shape[0]
    check_device(op, q, k_cache, v_cache, q_start, kv_lens)
    qs = int_lens(op, "q_start", q_start, bsz, q.device)
    kl = int_lens(op, "kv_lens", kv_lens, bsz, q.device)
    return launch(q, k_cache, v_cache, None, None, kl, None, qs, scale, True, group, block_m, block_n)
