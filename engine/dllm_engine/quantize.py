"""int8 weights for CPU inference: every projection and the LM head as a dynamically
quantized linear (fbgemm: int8 weights per output channel, activations quantized per call).

Why: a denoising pass of a pretrained base on a CPU runs a couple of rows through every
layer, so it is bound by reading the weights, and this CPU's bf16 GEMV reads them at ~4 GB/s;
fbgemm's int8 GEMV reads a quarter of fp32's bytes and ran a [2 x 576] x [576 x 3072] product
6x faster than bf16 here (benchmarks/RESULTS.md). The norms, RoPE and attention keep the
model's dtype; each quantized linear takes float32 in and gives the model's dtype back.
Opt-in (`EngineConfig(weights="int8")`), measured for quality before it is any default.
"""

from __future__ import annotations

import torch
from torch import nn


class Int8Linear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        float_linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        with torch.no_grad():
            float_linear.weight.copy_(weight.float())
            if bias is not None:
                float_linear.bias.copy_(bias.float())
        float_linear.qconfig = torch.ao.quantization.default_dynamic_qconfig
        self.q = torch.ao.nn.quantized.dynamic.Linear.from_float(float_linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x.float()).to(x.dtype)


def quantize_int8(model) -> None:
    """In place, after `fuse_projections` (the fused q/k/v and gate/up are quantized as one
    matrix each); inference only, CPU only (fbgemm)."""
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("int8 weights are for CPU inference (fbgemm)")
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        attn.qkv = Int8Linear(*attn.qkv) if attn.qkv is not None else None
        attn.o_proj = Int8Linear(attn.o_proj.weight, attn.o_proj.bias)
        if mlp.gate_up is not None:
            mlp.gate_up = Int8Linear(*mlp.gate_up)
        mlp.down_proj = Int8Linear(mlp.down_proj.weight)
    model.lm_head = Int8Linear(model.lm_head.weight)
