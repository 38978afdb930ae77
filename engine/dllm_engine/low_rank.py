"""A base's own low-rank adapter (LoRA) at inference: y = W x + B (A x) on each projection.

Why it runs beside the weights instead of being merged into them: the default model's
projections are the GGUF's Q4_1 blocks (weight_only.py), and a CPU-trained adapter moves a
weight by ~0.5% of a Q4_1 step (measured on the suffix-reading adapter): merged and
requantized it rounds away entirely, and even bf16 weights keep only part of it. So the
adapter's two thin products run after each projection, fused where the projections are
(q/k/v, gate/up: one A of stacked ranks, one block-diagonal B), in the model's dtype. Its
price on a CPU is high: a pass of the default model at 2 threads 19.2 -> 33.2 ms with a rank-16
adapter on every projection, 40.7 ms with its products in fp32 (benchmarks/RESULTS.md,
thirty-ninth session). Profiled in the engine (fortieth session), each of the 4 x 30 adapted
products adds two thin bf16 calls of ~23-24 us each, about what the int4 product beside it
costs (26 us): a per-call floor, not arithmetic. Adding B's product into the output in place
(addmm_, one call for a product and an add) moved a pass by under 2%, so it was not kept. So
the shipped adapter (forty-first session) adapts the attention alone: 60 products, a pass
20.7 -> 29.2 ms on HumanEval lines (34.5 with every projection), ~16 -> ~20 ms in the keystroke
replay, HumanEval as high as every projection's (benchmarks/RESULTS.md). (Those per-pass figures
divide a fill's time by its passes, and the adapter's fills take fewer: the model's forward
itself, 4 rows over a cached context, is 12.0 ms bare and was 15.6 with the adapter.) Since the
forty-second session the two thin products run through torch's int8 weight-only kernel on a
CPU (LowRankAdded's `weight_only`), whose per-call floor is a few microseconds: that forward
15.6 -> 14.1 ms (benchmarks/bench_adapter_price.py, the three alternated in one engine).

The folder (training/base_lora.py writes it): `lora.json` {rank, alpha, targets, trained}
and `lora.safetensors` (`model.layers.<i>.<self_attn|mlp>.<proj>.lora_a` [r, in] and
`.lora_b` [out, r]). The package ships one per base under `bases/lora/<base>/`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from . import row_buckets

CONFIG_FILE = "lora.json"
WEIGHTS_FILE = "lora.safetensors"
SHIPPED_ROOT = Path(__file__).resolve().parent / "bases" / "lora"


class LowRankAdded(nn.Module):
    """A projection (an nn.Module, or a fused (weight, bias) pair) plus B (A x).

    With `weight_only` (an engine whose base runs weight-only kernels: a CPU), A and B run
    through torch's int8 weight-only kernel (weight_only.Int8RowLinear, per-row scales) for a
    pass's few rows: its per-call floor is a few microseconds where oneDNN's bf16 GEMM's is
    ~20-25, and two such calls a product were most of the adapter's price (module docstring).
    int8 rounds B (A x) by ~1% of itself, a change of a few hundredths of a percent of the
    projection's output; from weight_only.DENSE_ROWS rows on they multiply in the model's dtype.
    A rank the kernel cannot take (weight_only.INT8_K_MULTIPLE) stays in the model's dtype."""

    def __init__(self, base, a: torch.Tensor, b: torch.Tensor, weight_only: bool = False) -> None:
        super().__init__()
        self.base = base
        self.register_buffer("a", a.contiguous(), persistent=False)  # [R, in]
        self.register_buffer("b", b.contiguous(), persistent=False)  # [out, R], the scale folded in
        self.down = self.up = None
        if weight_only:
            from .weight_only import Int8RowLinear, int8_fits

            if int8_fits(self.a) and int8_fits(self.b):
                self.down, self.up = Int8RowLinear(self.a), Int8RowLinear(self.b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x) if callable(self.base) else row_buckets.linear(x, *self.base)
        if self.down is not None:
            return y + self.up(self.down(x))
        # Through row_buckets like every other CPU bf16 product: oneDNN keeps a kernel per
        # row count it meets.
        return y + row_buckets.linear(row_buckets.linear(x, self.a), self.b)


def shipped_dir(base: str) -> Path:
    return SHIPPED_ROOT / base


def read(folder: Path) -> tuple[dict, dict[str, torch.Tensor]] | None:
    folder = Path(folder)
    if not (folder / CONFIG_FILE).is_file():
        return None
    from safetensors.torch import load_file

    return json.loads((folder / CONFIG_FILE).read_text()), load_file(str(folder / WEIGHTS_FILE))


def _stacked(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """One (A, B) for projections run as one product: A's ranks stacked, B block-diagonal."""
    a = torch.cat([p[0] for p in parts])
    b = torch.zeros(sum(p[1].shape[0] for p in parts), a.shape[0], dtype=a.dtype)
    row = col = 0
    for pa, pb in parts:
        b[row:row + pb.shape[0], col:col + pa.shape[0]] = pb
        row, col = row + pb.shape[0], col + pa.shape[0]
    return a, b


def attach_to(model, meta: dict, tensors: dict[str, torch.Tensor], weight_only: bool = False) -> int:
    """Wrap the model's projections (fused or not, any weights) in place; returns how many
    products gained an adapter. Check the shapes first: a folder for another base fails
    before anything is changed. `weight_only`: the factors through int8 kernels (LowRankAdded)."""
    if not hasattr(getattr(model, "model", None), "layers"):
        raise ValueError("a base adapter needs the engine's own model definition (this model runs through another)")
    param = next(model.parameters())
    dtype = param.dtype if param.dtype.is_floating_point else torch.float32
    scale = float(meta["alpha"]) / float(meta["rank"])

    def factors(layer: int, owner: str, name: str):
        key = f"model.layers.{layer}.{owner}.{name}"
        if f"{key}.lora_a" not in tensors:
            return None
        return tensors[f"{key}.lora_a"].float(), tensors[f"{key}.lora_b"].float() * scale

    plan = []
    for i, layer in enumerate(model.model.layers):
        for owner, module, fused_name, names in (
                ("self_attn", layer.self_attn, "qkv", ("q_proj", "k_proj", "v_proj")),
                ("mlp", layer.mlp, "gate_up", ("gate_proj", "up_proj"))):
            parts = [factors(i, owner, n) for n in names]
            if getattr(module, fused_name) is not None and any(parts):
                if not all(parts):
                    raise ValueError(f"layer {i}: an adapter on some of {names} only cannot join their fused product")
                plan.append((module, fused_name, _stacked(parts)))
            else:
                plan += [(module, n, p) for n, p in zip(names, parts) if p is not None]
        for owner, module, name in (("self_attn", layer.self_attn, "o_proj"), ("mlp", layer.mlp, "down_proj")):
            p = factors(i, owner, name)
            if p is not None:
                plan.append((module, name, p))
    for module, name, (a, b) in plan:
        base = getattr(module, name)
        out_features = base[0].shape[0] if isinstance(base, tuple) else getattr(base, "out_features", None)
        if out_features is not None and out_features != b.shape[0]:
            raise ValueError(f"an adapter of {b.shape[0]} outputs for a projection of {out_features}: another base's")
    for module, name, (a, b) in plan:
        setattr(module, name, LowRankAdded(getattr(module, name), a.to(param.device, dtype), b.to(param.device, dtype),
                                           weight_only))
    return len(plan)


def attach(loaded, where: str = "shipped", weight_only: bool = False) -> dict | None:
    """The adapter for `loaded` (a checkpoint.LoadedModel, after fuse/quantize): "shipped"
    (the package's for the model's base, when there is one), "none", or a folder. Returns its
    lora.json, or None when none applies. `weight_only`: its factors through int8 kernels, for
    a base that runs weight-only kernels."""
    if where == "none":
        return None
    base = loaded.config.extra.get("base")
    if where == "shipped" and not base:
        return None
    folder = shipped_dir(base) if where == "shipped" else Path(where)
    found = read(folder)
    if found is None:
        if where != "shipped":
            from .model_config import CheckpointError

            raise CheckpointError(f"{folder}: no {CONFIG_FILE} (a base adapter folder holds it and {WEIGHTS_FILE})")
        return None
    meta, tensors = found
    try:
        attach_to(loaded.model, meta, tensors, weight_only)
    except ValueError as exc:
        from .model_config import CheckpointError

        raise CheckpointError(f"{folder}: {exc}") from None
    return meta
