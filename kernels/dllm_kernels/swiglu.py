"""SwiGLU: silu(gate) * up, fused (one read of each input, one write of the output).

    y = gate * sigmoid(gate) * up         (computed in float32, stored in gate.dtype)

Takes gate and up separately, or one tensor [..., 2I] holding [gate | up] as a fused
gate_up projection produces it.
"""

from __future__ import annotations

import torch

from dllm_kernels._triton import check_device, require_triton, tl, triton


@triton.jit
def _swiglu_kernel(
    g_ptr, u_ptr, y_ptr,
    stride_g, stride_u, stride_y,
    N,
    BLOCK_N: tl.constexpr,
):
    """y[row, c] = silu(g[row, c]) * u[row, c]; grid (rows, cdiv(N, BLOCK_N))."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    y = g * tl.sigmoid(g) * u
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _split(gate: torch.Tensor, up: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    if up is not None:
        return gate, up
    if gate.shape[-1] % 2:
        raise ValueError(f"swiglu: a fused [gate | up] tensor needs an even last dim, got {gate.shape[-1]}")
    return gate.chunk(2, dim=-1)


def swiglu_reference(gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
    """Plain torch: silu(gate) * up, or on a fused [..., 2I] tensor when `up` is None."""
    g, u = _split(gate, up)
    return (torch.nn.functional.silu(g.float()) * u.float()).to(g.dtype)


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """[rows, n] with unit stride along n; a chunk of a fused tensor keeps its row stride."""
    if t.dim() == 2 and t.stride(-1) == 1:
        return t
    if t.stride(-1) == 1:
        try:
            return t.view(-1, n)
        except RuntimeError:
            pass
    return t.reshape(-1, n).contiguous()


def swiglu_triton(gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
    """Triton launcher; same contract as `swiglu_reference`."""
    require_triton("swiglu")
    g, u = _split(gate, up)
    check_device("swiglu", g, u)
    if g.shape != u.shape or g.dtype != u.dtype:
        raise ValueError(f"swiglu: gate {tuple(g.shape)}/{g.dtype} and up {tuple(u.shape)}/{u.dtype} differ")
    if not g.is_floating_point():
        raise TypeError(f"swiglu: floating-point tensors required, got {g.dtype}")
    n = g.shape[-1]
    y = torch.empty(g.shape, dtype=g.dtype, device=g.device)
    g2, u2, y2 = _rows(g, n), _rows(u, n), y.view(-1, n)
    rows = y2.shape[0]
    if rows > 0 and n > 0:
        block_n = min(4096, triton.next_power_of_2(n))
        grid = (rows, triton.cdiv(n, block_n))
        _swiglu_kernel[grid](
            g2, u2, y2, g2.stride(0), u2.stride(0), y2.stride(0), n,
            BLOCK_N=block_n, num_warps=4 if block_n <= 1024 else 8,
        )
    return y
