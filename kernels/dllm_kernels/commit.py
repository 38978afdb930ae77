"""The commit rule of a denoising pass, on the device with no host synchronisation.

For each request (row) b of masked [B, L] and confidence [B, L]:

    commit[b, i] = masked[b, i] and (confidence[b, i] >= threshold[b]
                                     or i == argmax over masked i of confidence[b, i])

so every row that still has a masked slot commits at least its most confident one
(first index on ties), and a row with nothing masked commits nothing. The result is a
bool tensor the engine applies with torch.where; nothing is read back to the host.
"""

from __future__ import annotations

import torch

from dllm_kernels._triton import check_device, require_triton, tl, triton


@triton.jit
def _commit_kernel(
    masked_ptr, conf_ptr, thr_ptr, out_ptr,
    stride_m, stride_c, stride_o, L,
    BLOCK_L: tl.constexpr,
):
    """One row per program; the whole row fits one block."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_L)
    valid = cols < L
    mk = tl.load(masked_ptr + row * stride_m + cols, mask=valid, other=0) != 0
    c = tl.load(conf_ptr + row * stride_c + cols, mask=valid, other=0.0).to(tl.float32)
    thr = tl.load(thr_ptr + row)
    # -- the most confident masked slot; a row with none masked gets no forced commit --
    best = tl.argmax(tl.where(mk, c, float("-inf")), axis=0)
    any_masked = tl.max(mk.to(tl.int32), axis=0) > 0
    commit = mk & ((c >= thr) | ((cols == best) & any_masked))
    tl.store(out_ptr + row * stride_o + cols, commit.to(tl.uint8), mask=valid)


def _thresholds(threshold, rows: int, device) -> torch.Tensor:
    """Per-row thresholds as float32 [B] (a float applies to every row)."""
    if isinstance(threshold, torch.Tensor):
        t = threshold.to(device=device, dtype=torch.float32).reshape(-1)
        if t.numel() == 1:
            return t.expand(rows).contiguous()
        if t.numel() != rows:
            raise ValueError(f"commit_mask: {t.numel()} thresholds for {rows} rows")
        return t.contiguous()
    return torch.full((rows,), float(threshold), dtype=torch.float32, device=device)


def _check(masked: torch.Tensor, confidence: torch.Tensor) -> None:
    if masked.dtype != torch.bool or masked.dim() != 2:
        raise ValueError(f"commit_mask: masked must be bool [B, L], got {tuple(masked.shape)}/{masked.dtype}")
    if confidence.shape != masked.shape or not confidence.is_floating_point():
        raise ValueError(
            f"commit_mask: confidence must be floating {tuple(masked.shape)}, got {tuple(confidence.shape)}/{confidence.dtype}"
        )


def commit_mask_reference(masked: torch.Tensor, confidence: torch.Tensor, threshold) -> torch.Tensor:
    """Plain torch, vectorised over the batch (no host sync either)."""
    _check(masked, confidence)
    if masked.shape[1] == 0:
        return masked.clone()
    thr = _thresholds(threshold, masked.shape[0], masked.device)
    conf = confidence.float()
    best = conf.masked_fill(~masked, float("-inf")).argmax(dim=-1, keepdim=True)  # [B, 1]
    forced = torch.zeros_like(masked).scatter_(1, best, True) & masked.any(dim=-1, keepdim=True)
    return masked & ((conf >= thr[:, None]) | forced)


def commit_mask_triton(masked: torch.Tensor, confidence: torch.Tensor, threshold) -> torch.Tensor:
    """Triton launcher; same contract as `commit_mask_reference`."""
    require_triton("commit_mask")
    _check(masked, confidence)
    rows, length = masked.shape
    thr = _thresholds(threshold, rows, masked.device)
    check_device("commit_mask", masked, confidence, thr)
    if masked.stride(-1) != 1:
        masked = masked.contiguous()
    if confidence.stride(-1) != 1:
        confidence = confidence.contiguous()
    out = torch.empty_like(masked, memory_format=torch.contiguous_format)
    if rows and length:
        # bool tensors travel as bytes: the same memory, a dtype every backend loads
        m8, o8 = masked.view(torch.uint8), out.view(torch.uint8)
        _commit_kernel[(rows,)](
            m8, confidence, thr, o8, m8.stride(0), confidence.stride(0), o8.stride(0), length,
            BLOCK_L=triton.next_power_of_2(length), num_warps=4,
        )
    return out
