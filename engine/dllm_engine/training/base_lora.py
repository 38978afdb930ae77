"""Low-rank adapters (LoRA) on a base's projections, for training the base itself.

Each target projection (an `nn.Linear` of the unfused model, as `checkpoint.load` returns
it) is wrapped: y = W x + (alpha / r) * B (A x), W frozen, A and B learned (B starts at
zero, so step 0 is exactly the base). The adapter is stored on its own (a few MB of
safetensors), and `merge` folds it into the weights for evaluation or export: a merged
model is an ordinary checkpoint, decoded by the engine like any other.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

from ..low_rank import CONFIG_FILE, WEIGHTS_FILE  # the engine reads what this writes

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        self.scale = alpha / rank
        self.enabled = True  # off: the frozen base (disabled(); a teacher needs no second copy)
        # fp32 factors over a bf16 base: the update is small against the weights, and bf16
        # would round most of it away.
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return self.base(x)
        low = (x.float() @ self.lora_a.T) @ self.lora_b.T
        return self.base(x) + (self.scale * low).to(x.dtype)

    def delta(self) -> torch.Tensor:
        return self.scale * (self.lora_b @ self.lora_a)


def _wrapped(model) -> list[tuple[str, LoRALinear]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, LoRALinear)]


def attach(model, rank: int = 16, alpha: float = 32.0, targets: tuple[str, ...] = TARGETS) -> list[nn.Parameter]:
    """Wrap every target projection of every layer; returns the adapter's parameters."""
    if any(layer.self_attn.qkv is not None for layer in model.model.layers):
        raise ValueError("LoRA needs the unfused model (checkpoint.load, before fuse_projections)")
    params = []
    for layer in model.model.layers:
        for owner in (layer.self_attn, layer.mlp):
            for name in targets:
                base = getattr(owner, name, None)
                if isinstance(base, nn.Linear):
                    wrapped = LoRALinear(base, rank, alpha)
                    setattr(owner, name, wrapped)
                    params += [wrapped.lora_a, wrapped.lora_b]
    model.lora_config = {"rank": rank, "alpha": alpha, "targets": list(targets)}
    return params


@contextlib.contextmanager
def disabled(model):
    """The model as the frozen base while inside (every adapter off)."""
    wrapped = [m for _, m in _wrapped(model)]
    for m in wrapped:
        m.enabled = False
    try:
        yield model
    finally:
        for m in wrapped:
            m.enabled = True


def state(model) -> dict[str, torch.Tensor]:
    out = {}
    for name, m in _wrapped(model):
        out[f"{name}.lora_a"] = m.lora_a.detach().contiguous()
        out[f"{name}.lora_b"] = m.lora_b.detach().contiguous()
    return out


def save(model, folder: Path, trained: dict | None = None) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (WEIGHTS_FILE + ".tmp")
    save_file(state(model), str(tmp))
    tmp.replace(folder / WEIGHTS_FILE)
    meta = {**model.lora_config, "trained": trained or {}}
    (folder / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n")


def load_into(model, folder: Path) -> bool:
    """Attach the adapter saved in `folder` to `model` (unfused); False when there is none."""
    folder = Path(folder)
    if not (folder / CONFIG_FILE).exists():
        return False
    meta = json.loads((folder / CONFIG_FILE).read_text())
    attach(model, meta["rank"], meta["alpha"], tuple(meta["targets"]))
    saved = load_file(str(folder / WEIGHTS_FILE))
    for name, m in _wrapped(model):
        m.lora_a.data.copy_(saved[f"{name}.lora_a"])
        m.lora_b.data.copy_(saved[f"{name}.lora_b"])
    return True


@torch.no_grad()
def merge(model) -> None:
    """Fold every adapter into its projection's weight (in fp32, rounded once to the weight's
    dtype) and unwrap it: the model is a plain one again."""
    for name, m in _wrapped(model):
        w = m.base.weight
        w.copy_((w.float() + m.delta()).to(w.dtype))
        owner = model.get_submodule(name.rsplit(".", 1)[0])
        setattr(owner, name.rsplit(".", 1)[1], m.base)
    if hasattr(model, "lora_config"):
        del model.lora_config
