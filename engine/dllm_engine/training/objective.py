"""The masked-diffusion loss on the canvas, plus a next-token loss on the context.

Diffusion: per row a masking level t ~ U(eps, 1] (stratified across the batch
to cut variance), each canvas slot masked with probability t; cross-entropy on
the masked slots weighted by 1/t and normalised by the canvas size (the
masked-diffusion ELBO as in MDLM/LLaDA), with t the row's realised masking
ratio so a nearly clean row cannot carry a weight of 1/eps. Rows in a grown-canvas state keep
their committed head unmasked, as the engine does after doubling a canvas.

The auxiliary loss (default-model-notes.md) is next-token cross-entropy
on a random fraction of the causal context positions: it teaches the context
encoder language at little cost, since the lm_head runs only on chosen rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..model import DiffusionTransformer
from .canvas import IGNORE, Batch


@dataclass
class LossConfig:
    eps: float = 1e-3
    aux_weight: float = 0.5
    aux_fraction: float = 0.2


def hidden_states(model: DiffusionTransformer, ids: torch.Tensor, positions: torch.Tensor,
                  mask: torch.Tensor) -> torch.Tensor:
    """Final normed hidden states [B, S, D]; the lm_head is applied only where a loss needs it."""
    x = model.model.embed_tokens(ids)
    cos, sin = model.rope(positions)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    for layer in model.model.layers:
        x, _ = layer(x, cos, sin, mask, None)
    return model.model.norm(x)


def sample_canvas_mask(canvas: torch.Tensor, heads: torch.Tensor, gen: torch.Generator,
                       cfg: LossConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked bool [B, L], t [B]): slots after each row's committed head are masked with
    probability t; every row has at least one masked slot."""
    b, length = canvas.shape
    u = torch.rand((), generator=gen)
    t = ((u + torch.arange(b) / b) % 1.0) * (1 - cfg.eps) + cfg.eps
    r = torch.rand((b, length), generator=gen)
    after_head = torch.arange(length)[None] >= heads[:, None]
    masked = (r < t[:, None]) & after_head
    none = ~masked.any(dim=1)
    fallback = torch.where(after_head, r, 2.0).argmin(dim=1)  # the slot closest to being masked
    masked[none, fallback[none]] = True
    return masked, t


def diffusion_loss(model: DiffusionTransformer, batch: Batch, gen: torch.Generator, mask_id: int,
                   cfg: LossConfig, hidden_fn=hidden_states) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss, stats); `hidden_fn` may be a torch.compile'd hidden_states."""
    masked_cpu, t_cpu = sample_canvas_mask(batch.canvas.cpu(), batch.heads.cpu(), gen, cfg)
    device = batch.canvas.device
    masked, t = masked_cpu.to(device), t_cpu.to(device)
    noisy = torch.where(masked, torch.full_like(batch.canvas, mask_id), batch.canvas)
    ids = torch.cat((batch.context_ids, noisy), dim=1)
    h = hidden_fn(model, ids, batch.positions, batch.mask)
    t_max = batch.context_ids.shape[1]
    b, length = batch.canvas.shape

    logits = model.lm_head(h[:, t_max:][masked]).float()  # [M, V]
    ce = F.cross_entropy(logits, batch.canvas[masked], reduction="none")
    # 1/t with t the realised masking ratio of the row (masked / maskable slots), not the drawn one:
    # rows drawn with a tiny t still get their one forced masked slot, and weighting it by the drawn
    # 1/t (up to 1/eps = 1000) made single-token spikes dominate the gradient and Adam's second moment.
    maskable = (length - batch.heads).clamp(min=1).float()
    t_real = masked.sum(dim=1).float() / maskable
    weight = (1.0 / t_real)[:, None].expand(b, length)[masked]
    diff = (ce * weight).sum() / (b * length)
    stats = {"diff_loss": diff.item(), "masked_ce": ce.detach().mean().item()}
    loss = diff

    if cfg.aux_weight > 0:
        valid = batch.next_targets != IGNORE
        pick_cpu = torch.rand(batch.next_targets.shape, generator=gen) < cfg.aux_fraction
        pick = valid & pick_cpu.to(device)
        if pick.any():
            aux_logits = model.lm_head(h[:, :t_max][pick]).float()
            aux = F.cross_entropy(aux_logits, batch.next_targets[pick])
            loss = loss + cfg.aux_weight * aux
            stats["next_ce"] = aux.item()
    stats["loss"] = loss.item()
    return loss, stats
