"""Put each weight where it will live, writing it once.

q/k/v (and their biases) and gate/up of a layer go into one buffer each, in the order
`model._fuse_linears` stacks them, so `fuse_projections` finds them fused already and adds
nothing (its torch.cat used to make a second copy while the mapped originals stayed resident).
A weight with the target dtype on the CPU stays memory-mapped (file-backed, no copy); any
other is allocated at the target dtype on the target device and read into, piece by piece.
"""

from __future__ import annotations

import torch

from .model_config import ModelConfig
from .shards import ShardReader, TensorRef


def fused_groups(cfg: ModelConfig) -> list[tuple[str, ...]]:
    """Tensor names that share one buffer, in row order."""
    groups = []
    for i in range(cfg.num_layers):
        a, m = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        groups.append(tuple(a + f"{p}_proj.weight" for p in "qkv"))
        if cfg.qkv_bias:
            groups.append(tuple(a + f"{p}_proj.bias" for p in "qkv"))
        groups.append((m + "gate_proj.weight", m + "up_proj.weight"))
    return groups


def place_weights(state: dict, groups: list[tuple[str, ...]], device: torch.device, dtype: torch.dtype,
                  reader: ShardReader) -> None:
    """Replace every TensorRef (or tensor) in `state` by its tensor on `device` in `dtype`, in place."""
    for group in groups:
        rows = [state[n].shape[0] for n in group]
        fused = torch.empty((sum(rows), *state[group[0]].shape[1:]), dtype=dtype, device=device)
        lo = 0
        for name, n in zip(group, rows):
            _write(state[name], fused[lo:lo + n], reader)
            state[name] = fused[lo:lo + n]  # a view: the fused buffer is the only copy
            lo += n
    grouped = {n for g in groups for n in g}
    for name, src in state.items():
        if name in grouped:
            continue
        if isinstance(src, TensorRef) and device.type == "cpu" and src.dtype == dtype:
            state[name] = reader.mmap(src)
        elif isinstance(src, TensorRef):
            state[name] = torch.empty(src.shape, dtype=dtype, device=device)
            reader.read_into(src, state[name])
        else:  # an in-memory tensor from a caller of build_model
            state[name] = src.to(device=device, dtype=dtype)


def _write(src, dst: torch.Tensor, reader: ShardReader) -> None:
    if isinstance(src, TensorRef):
        reader.read_into(src, dst)
    else:
        dst.copy_(src)
