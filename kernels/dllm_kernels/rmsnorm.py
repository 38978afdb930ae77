"""RMSNorm fused with the residual add.

    h = x + residual                      (rounded to x.dtype: this is the new residual stream)
    y = h / sqrt(mean(h^2) + eps) * w     (computed in float32, stored in x.dtype)

One program normalises one row; the whole row stays in registers (hidden sizes up to
~16k), so x, residual and w are each read once and y, h written once.
"""

from __future__ import annotations

import torch

from dllm_kernels._triton import check_device, require_triton, tl, triton

_MAX_FUSED_N = 16384  # one row per program must fit in registers/SRAM


@triton.jit
def _rmsnorm_kernel(
    x_ptr, r_ptr, w_ptr, y_ptr, h_ptr,
    stride_x, stride_r, stride_y, stride_h,
    N, eps,
    HAS_RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """y = rms_norm(x + r) * w; h = x + r. One row per program."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    # -- load the row and add the residual; round to the storage dtype as the stream does --
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(h_ptr.dtype.element_ty)
        tl.store(h_ptr + row * stride_h + cols, x, mask=mask)
    h = x.to(tl.float32)
    # -- normalise in float32 --
    mean_sq = tl.sum(h * h, axis=0) / N
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm_reference(x: torch.Tensor, w: torch.Tensor, eps: float, residual: torch.Tensor | None = None):
    """Plain torch: returns y, or (y, new_residual) when `residual` is given."""
    h = x
    if residual is not None:
        h = (x.float() + residual.float()).to(x.dtype)
    hf = h.float()
    y = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)
    return y if residual is None else (y, h)


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """View as [rows, n] with unit stride along n (copies only when no such view exists)."""
    t2 = t.reshape(-1, n)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def rms_norm_triton(x: torch.Tensor, w: torch.Tensor, eps: float, residual: torch.Tensor | None = None):
    """Triton launcher; same contract as `rms_norm_reference`."""
    require_triton("rms_norm")
    check_device("rms_norm", x, w, residual)
    n = x.shape[-1]
    if w.shape != (n,):
        raise ValueError(f"rms_norm: weight shape {tuple(w.shape)} does not match hidden size {n}")
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        raise ValueError(
            f"rms_norm: residual {tuple(residual.shape)}/{residual.dtype} must match x {tuple(x.shape)}/{x.dtype}"
        )
    if not x.is_floating_point() or not w.is_floating_point():
        raise TypeError(f"rms_norm: floating-point tensors required, got {x.dtype} and {w.dtype}")
    if n > _MAX_FUSED_N:
        raise ValueError(f"rms_norm: hidden size {n} exceeds the fused limit {_MAX_FUSED_N}")
    x2 = _rows(x, n)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    y2 = y.view(-1, n)
    r2 = _rows(residual, n) if residual is not None else x2
    h = torch.empty_like(y) if residual is not None else y
    h2 = h.view(-1, n)
    rows = x2.shape[0]
    if rows > 0:
        block_n = triton.next_power_of_2(n)
        num_warps = 4 if block_n <= 2048 else 8 if block_n <= 8192 else 16
        _rmsnorm_kernel[(rows,)](
            x2, r2, w.contiguous(), y2, h2,
            x2.stride(0), r2.stride(0), y2.stride(0), h2.stride(0),
            n, float(eps),
            HAS_RESIDUAL=residual is not None, BLOCK_N=block_n, num_warps=num_warps,
        )
    return y if residual is None else (y, h)
