"""Low-rank adapters (LoRA) on a base's projections, for training the base itself.

Each target projection (an `nn.Linear` of the unfused model, as `checkpoint.load` returns
it) is wrapped: y = W x + (alpha / r) * B (A x), W frozen, A and B learned (B starts at
zero, so step 0 is exactly the base). The adapter is stored on its own (a few MB of
safetensors), and `merge` folds it into the weights for evaluation or export: a merged
model is an ordinary checkpoint, decoded by the engine like any other.

The other way to train the same projections (`attach_full`): a full-rank fp32 delta beside each
frozen weight, learnt like full fine-tuning, and compressed for the engine by a truncated SVD
into the same (A, B) folder (`save`): one adapter format and one loader whichever way it was
learnt. The issue asks which learns faster per CPU hour (benchmarks/RESULTS.md, forty-eighth
session). The folder keeps the full delta too (`delta.safetensors`), for a run to resume from; a
shipped adapter copies only the compressed factors.
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
DELTA_FILE = "delta.safetensors"  # a full-rank run's uncompressed delta, for resuming only


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


class DeltaLinear(nn.Module):
    """A frozen projection plus a learnt full-rank delta: y = W x + D x, D fp32 from zero.

    D is kept apart from W rather than trained in place: the base's weights are bf16, and an
    update of a fine-tuning step (~1e-5 of a weight of ~1e-2) is below bf16's resolution there,
    so it would round away. The product runs in the activations' dtype (bf16: D's rounding there
    is relative to D, not to W); the gradient reaches D in fp32 through the cast."""

    def __init__(self, base: nn.Linear, rank: int) -> None:
        super().__init__()
        self.base = base
        self.rank = rank  # what `factors` compresses D to when it is saved
        self.enabled = True
        self.delta_w = nn.Parameter(torch.zeros(base.out_features, base.in_features, device=base.weight.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return self.base(x)
        return self.base(x) + nn.functional.linear(x, self.delta_w.to(x.dtype))

    def delta(self) -> torch.Tensor:
        return self.delta_w

    @torch.no_grad()
    def factors(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(A [r, in], B [out, r], the share of D's squared norm they keep): D's best rank-r
        approximation, B A, its singular values split evenly between the two factors."""
        u, s, vh = torch.linalg.svd(self.delta_w.float(), full_matrices=False)
        r = min(self.rank, s.numel())
        root = s[:r].sqrt()
        total = float((s * s).sum())
        kept = float((s[:r] * s[:r]).sum()) / total if total > 0 else 1.0
        return (root[:, None] * vh[:r]).contiguous(), (u[:, :r] * root[None]).contiguous(), kept


def _wrapped(model) -> list[tuple[str, LoRALinear | DeltaLinear]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, (LoRALinear, DeltaLinear))]


def _wrap(model, targets: tuple[str, ...], make) -> list[nn.Parameter]:
    if any(layer.self_attn.qkv is not None for layer in model.model.layers):
        raise ValueError("an adapter needs the unfused model (checkpoint.load, before fuse_projections)")
    params = []
    for layer in model.model.layers:
        for owner in (layer.self_attn, layer.mlp):
            for name in targets:
                base = getattr(owner, name, None)
                if isinstance(base, nn.Linear):
                    wrapped = make(base)
                    setattr(owner, name, wrapped)
                    params += list(wrapped.parameters(recurse=False))
    return params


def attach(model, rank: int = 16, alpha: float = 32.0, targets: tuple[str, ...] = TARGETS) -> list[nn.Parameter]:
    """Wrap every target projection of every layer; returns the adapter's parameters."""
    params = _wrap(model, targets, lambda base: LoRALinear(base, rank, alpha))
    model.lora_config = {"rank": rank, "alpha": alpha, "targets": list(targets)}
    return params


def attach_full(model, rank: int = 16, targets: tuple[str, ...] = TARGETS) -> list[nn.Parameter]:
    """Wrap every target projection in a full-rank delta (DeltaLinear); `rank` is the rank it
    is compressed to when saved. Returns the deltas."""
    params = _wrap(model, targets, lambda base: DeltaLinear(base, rank))
    # alpha = rank: the SVD's factors carry the scale themselves (the engine multiplies B by alpha / rank).
    model.lora_config = {"rank": rank, "alpha": float(rank), "targets": list(targets), "full_rank": True}
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


def state(model) -> tuple[dict[str, torch.Tensor], float | None]:
    """The (A, B) factors of every adapted projection, as the engine reads them, and for a
    full-rank delta the share of its squared norm the compressed factors keep (the least of
    any projection's; None for a LoRA)."""
    out, kept = {}, []
    for name, m in _wrapped(model):
        if isinstance(m, DeltaLinear):
            a, b, share = m.factors()
            kept.append(share)
        else:
            a, b = m.lora_a.detach(), m.lora_b.detach()
        out[f"{name}.lora_a"] = a.contiguous()
        out[f"{name}.lora_b"] = b.contiguous()
    return out, (min(kept) if kept else None)


def _write(tensors: dict[str, torch.Tensor], path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp))
    tmp.replace(path)


def save(model, folder: Path, trained: dict | None = None) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    factors, kept = state(model)
    _write(factors, folder / WEIGHTS_FILE)
    if model.lora_config.get("full_rank"):
        _write({f"{name}.delta": m.delta_w.detach().contiguous() for name, m in _wrapped(model)},
               folder / DELTA_FILE)
        trained = {**(trained or {}), "compressed_kept": round(kept, 4)}
    meta = {**model.lora_config, "trained": trained or {}}
    (folder / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n")


def load_into(model, folder: Path, *, resume: bool = True) -> bool:
    """Attach the adapter saved in `folder` to `model` (unfused); False when there is none. A
    full-rank run's folder comes back as its deltas when `resume` (to train on), otherwise as
    the factors that ship: what the engine runs, so a merged export computes the same."""
    folder = Path(folder)
    if not (folder / CONFIG_FILE).exists():
        return False
    meta = json.loads((folder / CONFIG_FILE).read_text())
    if resume and meta.get("full_rank") and (folder / DELTA_FILE).exists():
        attach_full(model, meta["rank"], tuple(meta["targets"]))
        saved = load_file(str(folder / DELTA_FILE))
        for name, m in _wrapped(model):
            m.delta_w.data.copy_(saved[f"{name}.delta"])
        return True
    attach(model, meta["rank"], meta["alpha"], tuple(meta["targets"]))
    saved = load_file(str(folder / WEIGHTS_FILE))
    for name, m in _wrapped(model):
        m.lora_a.data.copy_(saved[f"{name}.lora_a"])
        m.lora_b.data.copy_(saved[f"{name}.lora_b"])
    return True


@contextlib.contextmanager
def compressed(model):
    """Inside, every full-rank delta is its saved rank-r approximation (what the engine will
    run): the held-out figures of what ships, beside those of the delta that was learnt."""
    deltas = [m for _, m in _wrapped(model) if isinstance(m, DeltaLinear)]
    kept = [m.delta_w.detach().clone() for m in deltas]
    try:
        with torch.no_grad():
            for m in deltas:
                a, b, _ = m.factors()
                m.delta_w.copy_(b @ a)
        yield model
    finally:
        with torch.no_grad():
            for m, d in zip(deltas, kept):
                m.delta_w.copy_(d)


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
