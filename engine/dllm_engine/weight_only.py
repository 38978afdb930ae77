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
maximum). Re-deriving each block's minimum and step from the GGUF's float32 values gives
back the same q, d and m: the same weights the GGUF holds. The weight cache keeps them
(int4.safetensors) beside its bf16 weights, since re-deriving them from bf16-rounded
weights moves some q by one step. (A weight that was not Q4_1 would be rounded to 4 bits;
`quantize_int4` is only for bases whose catalog row says their projections are Q4_1.)
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import row_buckets

GROUP = 32  # Q4_1's block: inputs per scale and minimum
# From this many rows on, a projection multiplies with the dense weights it was built from:
# torch's int4 kernel is the faster one for a pass's few rows (~2.5x bf16 at 1-4 rows on
# this CPU), oneDNN's bf16 GEMM from about 8 rows (a context of hundreds of tokens was
# ~1.7x slower through the int4 kernel). benchmarks/RESULTS.md has the figures.
DENSE_ROWS = 8
INNER_TILES = 8  # the CPU int4 packing's inner k tiles (torch's _convert_weight_to_int4pack_for_cpu)
# torch's CPU int8 weight-only kernel reads its inputs in blocks of this many: with torch 2.13
# on an AVX-512 EPYC, 8, 24 and 40 inputs gave wrong products (or a crash), 16, 48 and 80 right ones.
INT8_K_MULTIPLE = 16


def kernel_dtype(model_dtype: torch.dtype) -> torch.dtype:
    """The activations' dtype inside the weight-only kernels: the model's when it is bf16 or
    fp16, bf16 for an fp32 model. torch's fp32 weight-only kernels are far slower than its bf16 ones: on an
    AVX2-only EPYC, 4 rows of a 3072x576 int4 projection took 16 ms in fp32 and 0.24 ms in
    bf16, the 49,152-row int8 head 54 ms and 3.9 ms, fp32 dense 0.75 ms and 22 ms. So an fp32
    model (a CPU without native bf16, cpu_features.py) still runs its few-row passes through
    the bf16 kernels, its activations and the product's output rounded to bf16 (the bias,
    residual stream, norms and attention stay fp32), and its many-row GEMMs dense in fp32."""
    return model_dtype if model_dtype in (torch.bfloat16, torch.float16) else torch.bfloat16


def int4_available() -> bool:
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") and hasattr(torch.ops.aten, "_weight_int8pack_mm")


def q4_blocks(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q uint8 [N, K], step float32 [N, K / GROUP], low float32 [N, K / GROUP]) with
    weight ~= low + step * q per group, Q4_1's own rule (minimum at q = 0, maximum at 15):
    on a Q4_1 tensor dequantized to float32 this gives back its q, d and m exactly."""
    n, k = weight.shape
    if k % GROUP:
        raise ValueError(f"int4 weights need inputs in groups of {GROUP}, got {k}")
    w = weight.detach().float().reshape(n, k // GROUP, GROUP)
    low, high = w.amin(-1), w.amax(-1)
    step = (high - low) / 15
    q = torch.where(step[..., None] > 0, (w - low[..., None]) / step.clamp(min=1e-30)[..., None], 0.0)
    return q.round().clamp(0, 15).to(torch.uint8).reshape(n, k), step, low


class Int4Linear(nn.Module):
    """y = x W^T (+ b) with W in groups of GROUP inputs: W = (q - 8) * scale + zero."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None,
                 blocks: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                 packed: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """From `weight` (re-derived groups), or from `blocks` (q, step, low) kept from the
        GGUF (weight_cache.py), which the model dtype's rounding of `weight` has not touched,
        or from `packed` (the kernel's packed weights and scales, saved by an earlier load)."""
        super().__init__()
        dtype = kernel_dtype(weight.dtype)
        if packed is None:
            q, step, low = blocks if blocks is not None else q4_blocks(weight)
            packed_q = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), INNER_TILES)
            # [k / GROUP, n, 2]: per group and output, the scale and the value at q = 8
            sz = torch.stack((step.float(), low.float() + 8 * step.float()), -1).transpose(0, 1).contiguous()
            packed = (packed_q, sz)
        self.register_buffer("packed", packed[0])
        self.register_buffer("scales_zeros", packed[1].to(dtype))
        # In the model's dtype, added after the product: an fp32 model's bias is not rounded.
        self.register_buffer("bias", None if bias is None else bias.detach().to(weight.dtype))
        self.out_features = weight.shape[0]
        # The dense weights for many rows (DENSE_ROWS): the model's own tensor, no copy, not a buffer.
        self.dense = weight.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if flat.shape[0] >= DENSE_ROWS:
            return row_buckets.linear(x, self.dense.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))
        if flat.dtype != self.scales_zeros.dtype or not flat.is_contiguous():
            flat = flat.to(self.scales_zeros.dtype).contiguous()
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.packed, GROUP, self.scales_zeros)
        y = y.view(*shape[:-1], self.out_features)
        if y.dtype != x.dtype:  # (the checks: per-call overhead is most of a small pass)
            y = y.to(x.dtype)
        return y if self.bias is None else y + self.bias


def int8_fits(weight: torch.Tensor) -> bool:
    """Whether Int8RowLinear can run `weight` [out, in] (INT8_K_MULTIPLE)."""
    return weight.shape[-1] % INT8_K_MULTIPLE == 0


class Int8RowLinear(nn.Module):
    """y = x W^T with W int8 per output row (the LM head: tied to the embedding, not Q4_1).

    From DENSE_ROWS rows on it multiplies with the dense weights, as Int4Linear does: torch's
    int8 kernel is a GEMV at heart (128 rows of SmolLM2's 49,152-row head took 127 ms through
    it, ~25 ms through oneDNN's bf16 GEMM), and a scoring pass or a next-edit stream asks for
    the logits of a hundred rows and more."""

    def __init__(self, weight: torch.Tensor, packed: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        super().__init__()
        if not int8_fits(weight):
            raise ValueError(f"the int8 kernel needs inputs in multiples of {INT8_K_MULTIPLE}, got {weight.shape[1]}")
        dtype = kernel_dtype(weight.dtype)
        if packed is None:
            w = weight.detach().float()
            scale = (w.abs().amax(-1) / 127).clamp(min=1e-30)
            packed = ((w / scale[:, None]).round().clamp(-127, 127).to(torch.int8), scale)
        self.register_buffer("q", packed[0])
        self.register_buffer("scale", packed[1].to(dtype))
        self.out_features = weight.shape[0]
        # The model's own tensor (a tied head's is the embedding, which stays loaded anyway), not a buffer.
        self.dense = weight.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        if x.numel() // shape[-1] >= DENSE_ROWS:
            return row_buckets.linear(x, self.dense.to(x.dtype))
        flat = x.reshape(-1, shape[-1]).to(self.scale.dtype).contiguous()
        y = torch.ops.aten._weight_int8pack_mm(flat, self.q, self.scale)
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


def pack_nibbles(q: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K] of values 0..15 -> uint8 [N, K / 2], two a byte (low nibble first)."""
    return q[:, 0::2] | (q[:, 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    return torch.stack((packed & 15, packed >> 4), -1).reshape(packed.shape[0], -1)


PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


@contextlib.contextmanager
def open_kept_blocks(model_dir):
    """The int4 blocks a base's weight cache keeps (weight_cache.INT4_FILE), or None."""
    from safetensors import safe_open

    path = Path(model_dir) / "int4.safetensors" if model_dir is not None else None
    if path is None or not path.is_file():
        yield None
        return
    with safe_open(str(path), framework="pt") as handle:
        yield handle


def kept_blocks(blocks, layer: int, names: tuple[str, ...]):
    """(q, step, low) of the named projections of one layer stacked by output row (a fused
    q/k/v or gate/up), from `blocks` (a safetensors handle of weight_cache's int4 file);
    None when any is missing (then the groups are re-derived from the loaded weights)."""
    if blocks is None:
        return None
    keys = set(blocks.keys())
    parts = []
    for name in names:
        key = f"model.layers.{layer}.{name}"
        if f"{key}.q" not in keys:
            return None
        parts.append((unpack_nibbles(blocks.get_tensor(f"{key}.q")), blocks.get_tensor(f"{key}.step"),
                      blocks.get_tensor(f"{key}.low")))
    return tuple(torch.cat(t) for t in zip(*parts))


def quantize_int4(model, head: bool = True, blocks=None, packed_file: Path | None = None) -> None:
    """In place, after `fuse_projections`: every projection int4 (Q4_1's blocks: from
    `blocks` when given, else re-derived from the loaded weights), the LM head int8 per row
    when `head`. CPU inference only.

    `packed_file`: where the packed result is kept for the next load (the kernel's packing
    is torch's own, so the file is named per torch version and dtype by the caller); read
    from it when it exists: building it costs seconds, reading it a fraction of one."""
    if not int4_available():
        raise ValueError("this torch has no CPU weight-only int4 kernels")
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("int4 weights are for CPU inference")
    saved = _read_packed(packed_file)
    built: dict[str, torch.Tensor] = {}

    def make(key: str, weight, bias, names):
        kept = None if saved is not None else kept_blocks(blocks, i, names)
        packed = (saved[f"{key}.packed"], saved[f"{key}.scales_zeros"]) if saved is not None else None
        lin = Int4Linear(weight, bias, blocks=kept, packed=packed)
        built[f"{key}.packed"], built[f"{key}.scales_zeros"] = lin.packed, lin.scales_zeros
        return lin

    for i, layer in enumerate(model.model.layers):
        attn, mlp, at = layer.self_attn, layer.mlp, f"layers.{i}"
        if attn.qkv is not None:
            attn.qkv = make(f"{at}.qkv", *attn.qkv, PROJECTIONS[:3])
        attn.o_proj = make(f"{at}.o_proj", attn.o_proj.weight, attn.o_proj.bias, PROJECTIONS[3:4])
        if mlp.gate_up is not None:
            mlp.gate_up = make(f"{at}.gate_up", *mlp.gate_up, PROJECTIONS[4:6])
        mlp.down_proj = make(f"{at}.down_proj", mlp.down_proj.weight, None, PROJECTIONS[6:])
    if head:
        kept = (saved["lm_head.q"], saved["lm_head.scale"]) if saved is not None and "lm_head.q" in saved else None
        model.lm_head = Int8RowLinear(model.lm_head.weight, packed=kept)
        built["lm_head.q"], built["lm_head.scale"] = model.lm_head.q, model.lm_head.scale
    if saved is None and packed_file is not None:
        _write_packed(packed_file, built)


def _read_packed(path: Path | None) -> dict[str, torch.Tensor] | None:
    if path is None or not path.is_file():
        return None
    from safetensors.torch import load_file

    try:
        loaded = load_file(str(path))
    except Exception:  # a damaged file: build again (and overwrite it)
        return None
    # Copies, not views into the file's buffer: the CPU kernels read with aligned vector
    # loads, and a tensor at a safetensors offset is not 64-byte aligned (int8pack_mm
    # crashed on it at 8 rows and more).
    return {k: v.clone() for k, v in loaded.items()}


def _write_packed(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Atomically (tmp + rename), and only where the model folder is writable."""
    from safetensors.torch import save_file

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
