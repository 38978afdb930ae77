"""Attention of canvas queries over [cached context ++ canvas] (one denoising pass).

Cache layout (shared with the engine): per layer, context K and V are [B, H_kv, T, D]
(padded to T; request b owns rows [0, context_lens[b])); canvas q is [B, H, L, D] and
canvas k/v are [B, H_kv, L, D] (slots >= canvas_lens[b] are padding, hidden as keys).

    o[b, h, i] = softmax_j(scale * q[b, h, i] . k[j]) v[j]
    j over context rows < context_lens[b], then canvas rows < canvas_lens[b]

Non-causal: every canvas token sees the whole context and the whole canvas. The kernel is
the shared flash-attention forward in `_attention_kernel`.
"""

from __future__ import annotations

import torch

from dllm_kernels._attention_kernel import check_qkv, int_lens, launch, sdpa_masked
from dllm_kernels._triton import check_device, require_triton


def canvas_attention_reference(q, k_ctx, v_ctx, context_lens, k_canvas, v_canvas, scale, canvas_lens=None):
    """torch SDPA over [context ++ canvas] with an explicit boolean mask."""
    bsz, _, L, _ = q.shape
    T = k_ctx.shape[2]
    dev = q.device
    ctx_visible = torch.arange(T, device=dev)[None, :] < context_lens.to(dev)[:, None]  # [B, T]
    cl = canvas_lens if canvas_lens is not None else torch.full((bsz,), L, device=dev)
    canvas_visible = torch.arange(L, device=dev)[None, :] < cl.to(dev)[:, None]  # [B, L]
    mask = torch.cat((ctx_visible, canvas_visible), dim=1)[:, None, None, :].expand(bsz, 1, L, T + L)
    k = torch.cat((k_ctx, k_canvas), dim=2)
    v = torch.cat((v_ctx, v_canvas), dim=2)
    return sdpa_masked(q, k, v, mask, scale)


def canvas_attention_triton(
    q, k_ctx, v_ctx, context_lens, k_canvas, v_canvas, scale, canvas_lens=None, block_m=None, block_n=None,
    num_splits=None,
):
    """Triton launcher; same contract as `canvas_attention_reference`. Returns [B, H, L, D]."""
    op = "canvas_attention"
    require_triton(op)
    group = check_qkv(op, q, (("context", k_ctx, v_ctx), ("canvas", k_canvas, v_canvas)))
    bsz, _, L, _ = q.shape
    if k_canvas.shape[2] != L:
        raise ValueError(f"{op}: canvas k/v have {k_canvas.shape[2]} rows for {L} canvas queries")
    check_device(op, q, k_ctx, v_ctx, k_canvas, v_canvas, context_lens)
    len1 = int_lens(op, "context_lens", context_lens, bsz, q.device)
    len2 = int_lens(op, "canvas_lens", canvas_lens, bsz, q.device)
    if len2 is None:
        len2 = torch.full((bsz,), L, dtype=torch.int32, device=q.device)
    if k_ctx.shape[2] == 0:  # no context at all: the canvas is the only segment
        return launch(q, k_canvas, v_canvas, None, None, len2, None, None, scale, False, group, block_m, block_n)
    return launch(q, k_ctx, v_ctx, k_canvas, v_canvas, len1, len2, None, scale, False, group, block_m, block_n, num_splits)
