"""Weight-only low-bit projections for CPU inference: int4 in groups of 32 along the input
(the GGUF's own Q4_1 blocks), int8 per output row for the LM head.

Why: a pass of a pretrained base on a CPU runs a few rows through every layer, and
oneDNN's bf16 GEMV at a few rows reads the weights at a couple of GB/s; torch's
weight-only kernels (`_weight_int4pack_mm_for_cpu`, `_weight_int8pack_mm`) read a
quarter / half the bytes and dequantize in registers, with the activations left in the
model's dtype (unlike quantize.py's dynamic int8, which rounds activations to 8 bits
too and measured worse).

Why int4 loses nothing for SmolLM2: its GGUF stores every projection as Q4_1 (per block
of 32 inputs, w = d * q + m with q in 0..15, m the block's minimum and m + 15 d its
maximum). Re-deriving each block's minimum and step from the loaded weights recovers the
same q and, up to the model dtype's rounding, the same d and m: the same weights the
GGUF holds. (A weight that was not Q4_1 would be rounded to 4 bits; `quantize_int4`
is only for bases whose catalog row says their projections are Q4_1.)
"""

from __future__ import annotations

import torch
from torch import nn

GROUP = 32  # Q4_1's block: inputs per scale and minimum
INNER_TILES = 8  # the CPU int4 packing's inner k tiles (torch's _convert_weight_to_int4pack_for_cpu)


def int4_available() -> bool:
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") and hasattr(torch.ops.aten, "_weight_int8pack_mm")


class Int4Linear(nn.Module):
    """y = x W^T (+ b) with W in groups of GROUP inputs: W = (q - 8) * scale + zero."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        n, k = weight.shape
        if k % GROUP:
            raise ValueError(f"int4 weights need inputs in groups of {GROUP}, got {k}")
        dtype = weight.dtype if weight.dtype in (torch.bfloat16, torch.float16) else torch.float32
        w = weight.detach().float().reshape(n, k // GROUP, GROUP)
        low, high = w.amin(-1), w.amax(-1)
        step = (high - low) / 15
        q = torch.where(step[..., None] > 0, (w - low[..., None]) / step.clamp(min=1e-30)[..., None], 0.0)
        q = q.round().clamp(0, 15).to(torch.int32).reshape(n, k)
        self.register_buffer("packed", torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, INNER_TILES))
        # [k / GROUP, n, 2]: per group and output, the scale and the value at q = 8
        self.register_buffer("scales_zeros", torch.stack((step, low + 8 * step), -1).transpose(0, 1).contiguous().to(dtype))
        self.register_buffer("bias", None if bias is None else bias.detach().to(dtype))
        self.out_features = n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).to(self.scales_zeros.dtype).contiguous()
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.packed, GROUP, self.scales_zeros)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


class Int8RowLinear(nn.Module):
    """y = x W^T with W int8 per output row (the LM head: tied to the embedding, not Q4_1)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        dtype = weight.dtype if weight.dtype in (torch.bfloat16, torch.float16) else torch.float32
        w = weight.detach().float()
        scale = (w.abs().amax(-1) / 127).clamp(min=1e-30)
        self.register_buffer("q", (w / scale[:, None]).round().clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(dtype))
        self.out_features = w.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).to(self.scale.dtype).contiguous()
        y = torch.ops.aten._weight_int8pack_mm(flat, self.q, self.scale)
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


def quantize_int4(model, head: bool = True) -> None:
    """In place, after `fuse_projections`: every projection int4 (Q4_1's blocks), the LM
    head int8 per row when `head`. CPU inference only."""
    if not int4_available():
        raise ValueError("this torch has no CPU weight-only int4 kernels")
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("int4 weights are for CPU inference")
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        attn.qkv = Int4Linear(*attn.qkv) if attn.qkv is not None else None
        attn.o_proj = Int4Linear(attn.o_proj.weight, attn.o_proj.bias)
        if mlp.gate_up is not None:
            mlp.gate_up = Int4Linear(*mlp.gate_up)
        mlp.down_proj = Int4Linear(mlp.down_proj.weight)
    if head:
        model.lm_head = Int8RowLinear(model.lm_head.weight)
