"""The denoiser written the plain way (full-vocabulary log-softmax over every slot):
the reference that dllm_engine.denoise, which works on the masked slots only, must match."""

from __future__ import annotations

import torch


# The slot rules and the sampler are shared; what differs is the vocabulary-wide work.
from dllm_engine.denoise import PassOutput, SpecialIds, end_allowed, sample_tokens


def _stats(logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-1 prob, top-2 margin, negative entropy from log-probs [..., V]."""
    top2 = logp.topk(2, dim=-1).values.exp()
    p = logp.exp()
    neg_entropy = (p * logp).nan_to_num(0.0).sum(-1)
    return top2[..., 0], top2[..., 0] - top2[..., 1], neg_entropy


def reference_denoise_pass(
    logits: torch.Tensor,  # [B, L, V] aligned to canvas slots
    canvas: torch.Tensor,  # [B, L]
    valid: torch.Tensor,  # [B, L] bool
    special: SpecialIds,
    threshold: torch.Tensor,  # [B]
    temperature: list[float],
    top_p: list[float],
    confidence_kind: list[str],
    generators: list[torch.Generator | None],
) -> PassOutput:
    b, length, vocab = logits.shape
    masked = (canvas == special.mask) & valid
    logits = logits.float()
    temp = torch.tensor([t if t > 0 else 1.0 for t in temperature], device=logits.device)
    logits = logits / temp[:, None, None]
    if special.banned:
        logits[..., list(special.banned)] = float("-inf")
    # End tokens: allowed after a committed token, or at slot 0 when confident.
    end_ids = list(special.end)
    logp_full = logits.log_softmax(-1)
    p_end = logp_full[..., end_ids].exp().sum(-1)  # [B, L]
    end_ok = end_allowed(canvas, valid, special)
    end_ok[:, 0] |= p_end[:, 0] >= threshold
    logits[..., end_ids] = logits[..., end_ids].masked_fill(~end_ok[..., None], float("-inf"))
    logp = logits.log_softmax(-1)

    top1, margin, neg_entropy = _stats(logp)
    tokens = logp.argmax(-1)
    for row in range(b):  # sampling only for rows that asked for it; each with its own generator
        if temperature[row] > 0 and masked[row].any():
            slots = masked[row].nonzero().squeeze(-1)
            tokens[row, slots] = sample_tokens(logp[row, slots], temperature[row], top_p[row], generators[row])
    chosen_p = logp.gather(-1, tokens[..., None]).squeeze(-1).exp()
    # Every kind is scaled to (0, 1] so one threshold means the same for all:
    # entropy as exp(-H), 1 for a certain slot.
    kinds = {"max_prob": chosen_p, "margin": margin, "neg_entropy": neg_entropy.exp()}
    conf = torch.stack([kinds[k][row] for row, k in enumerate(confidence_kind)]) if b else chosen_p
    conf = conf.masked_fill(~masked, float("-inf"))

    # threshold >= 1 means one token per pass (the reference samplers' setting).
    commit = masked & (conf >= threshold[:, None]) & (threshold[:, None] < 1.0)
    forced = conf.argmax(-1)
    has_masked = masked.any(-1)
    commit[torch.arange(b, device=commit.device)[has_masked], forced[has_masked]] = True

    current = canvas.clamp(min=0)
    token_prob = logp_full.gather(-1, current[..., None]).squeeze(-1).exp()
    return PassOutput(tokens=tokens, confidence=conf, commit=commit, token_prob=token_prob)
