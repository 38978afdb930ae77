"""The denoiser: from one pass's logits over every active canvas to committed tokens.

Pure tensor functions, vectorised over the batch (rows are canvases, padded to
the longest; `valid` marks real slots). Per pass, for every masked slot:

1. restrict the distribution: special tokens never; the end token (`<pad>` or
   EOS) only right after a committed token, or at slot 0 when it is itself
   confident (a confidence-ordered decoder otherwise commits padding from the
   predictable right edge first and the fill collapses to nothing);
2. pick a token: argmax, or a sample at `temperature` within `top_p`
   (one torch.Generator per canvas, so results do not depend on batching);
3. score it: max probability, top-2 margin or exp(-entropy), all in (0, 1];
4. commit every masked slot whose confidence clears the threshold, and at
   least the most confident one (Fast-dLLM's threshold rule); a threshold of
   1 or more commits exactly one per pass;
5. optionally re-mask committed tokens whose probability has fallen below
   `remask_below` (a bounded budget per canvas keeps it terminating).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from dllm_kernels import dispatch as kernels


@dataclass(frozen=True)
class SpecialIds:
    mask: int
    end: tuple[int, ...]  # tokens that end a fill (pad, EOS)
    banned: tuple[int, ...]  # never generated (mask, layout markers)


@dataclass
class PassOutput:
    tokens: torch.Tensor  # [B, L] proposed token per slot
    confidence: torch.Tensor  # [B, L] (-inf where nothing may be committed)
    commit: torch.Tensor  # [B, L] bool
    token_prob: torch.Tensor  # [B, L] probability of the current canvas token (for re-masking)
    # [B, L] probability of `tokens` at the masked slots (0 elsewhere), whatever the confidence
    # kind: Hole.min_token_prob's rule (unsure_stop.py) reads it for the slots committed.
    picked_prob: torch.Tensor | None = None


def end_allowed(canvas: torch.Tensor, valid: torch.Tensor, special: SpecialIds) -> torch.Tensor:
    """bool [B, L]: slots where an end token may be committed (right after a committed token)."""
    committed = (canvas != special.mask) & valid
    left = torch.zeros_like(committed)
    left[:, 1:] = committed[:, :-1]
    return left


def sample_tokens(logp: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None) -> torch.Tensor:
    """Sample one token per slot from log-probs [L, V] already divided by temperature."""
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p  # always keeps the top token
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)


def denoise_pass(
    logits: torch.Tensor,  # [B, L, V] aligned to canvas slots, or [M, V]: the masked slots only
    canvas: torch.Tensor,  # [B, L]
    valid: torch.Tensor,  # [B, L] bool
    special: SpecialIds,
    threshold: torch.Tensor,  # [B]
    temperature: list[float],
    top_p: list[float],
    confidence_kind: list[str],
    generators: list[torch.Generator | None],
    with_token_prob: bool = True,
    force: str | None = None,
    window: torch.Tensor | None = None,
) -> PassOutput:
    """One pass's commits. Only the masked slots' rows of `logits` are read (the engine
    computes no others), so the vocabulary-wide work is proportional to what is still
    masked; `with_token_prob` adds the committed tokens' probabilities for re-masking.

    On CUDA (or `force="triton"`) greedy statistics come from the fused confidence kernel
    (one streaming pass per row: argmax, probability, margin, entropy; no softmax in
    memory) and the commit rule from the commit kernel, with no host synchronisation.

    Compact `logits` [M, V] hold the masked slots' rows in row-major order (what the
    runner computes when asked for them alone); they cannot give `with_token_prob`.

    `window` (bool [B, L], block decoding): only these masked slots may be committed."""
    b, length = canvas.shape
    compact = logits.dim() == 2
    if compact and with_token_prob:
        raise ValueError("re-masking needs every slot's logits, not the masked slots' alone")
    masked = (canvas == special.mask) & valid
    if window is not None:
        masked &= window
    temp = torch.tensor([t if t > 0 else 1.0 for t in temperature], device=logits.device)
    token_prob = torch.zeros((b, length), device=logits.device)
    if with_token_prob:
        token_prob = _token_prob(logits, canvas, temp, special)
    rb, rl = masked.nonzero(as_tuple=True)  # row-major: each canvas's slots in order
    tokens = canvas.clone()
    conf = torch.full((b, length), float("-inf"), device=logits.device)
    picked_prob = torch.zeros((b, length), device=logits.device)
    if rb.numel():
        sub = (logits if compact else logits[rb, rl]).float() / temp[rb, None]  # [M, V]
        if special.banned:
            sub[:, list(special.banned)] = float("-inf")
        # End tokens: allowed after a committed token, or at slot 0 when confident.
        end_ids = list(special.end)
        end_ok = end_allowed(canvas, valid, special)
        first = rl == 0
        if first.any():
            p_end = (sub[first][:, end_ids].logsumexp(-1) - sub[first].logsumexp(-1)).exp()
            end_ok[rb[first], 0] |= p_end >= threshold[rb[first]]
        sub[:, end_ids] = sub[:, end_ids].masked_fill(~end_ok[rb, rl][:, None], float("-inf"))
        fused = kernels.use_triton(sub, force) and all(t <= 0 for t in temperature)
        if fused:
            stats = kernels.confidence_stats(sub, 1.0, force="triton")
            kinds = {"max_prob": stats.prob, "margin": stats.margin, "neg_entropy": (-stats.entropy).exp()}
            score = torch.stack([kinds[k] for k in confidence_kind])[rb, torch.arange(rb.numel(), device=sub.device)] \
                if len(set(confidence_kind)) > 1 else kinds[confidence_kind[0]]
            tokens[rb, rl] = stats.token
            conf[rb, rl] = score.float()
            picked_prob[rb, rl] = stats.prob.float()  # greedy only here: the picked token is the likeliest
        else:
            _torch_stats(sub, rb, rl, tokens, conf, picked_prob, temperature, top_p, confidence_kind, generators)
    else:
        fused = kernels.use_triton(logits, force)

    # threshold >= 1 means one token per pass (the reference samplers' setting).
    if fused:
        thr = torch.where(threshold < 1.0, threshold, torch.full_like(threshold, float("inf")))
        commit = kernels.commit_mask(masked, conf, thr, force="triton")
        return PassOutput(tokens=tokens, confidence=conf, commit=commit, token_prob=token_prob, picked_prob=picked_prob)
    commit = masked & (conf >= threshold[:, None]) & (threshold[:, None] < 1.0)
    forced = conf.argmax(-1)
    has_masked = masked.any(-1)
    commit[torch.arange(b, device=commit.device)[has_masked], forced[has_masked]] = True
    return PassOutput(tokens=tokens, confidence=conf, commit=commit, token_prob=token_prob, picked_prob=picked_prob)


def _torch_stats(sub, rb, rl, tokens, conf, picked_prob, temperature, top_p, confidence_kind, generators) -> None:
    """Tokens, confidences and the picked tokens' probabilities of the masked slots `sub`
    [M, V] (rows rb, slots rl), in place."""
    b = len(temperature)
    lse = sub.logsumexp(-1)  # [M]
    picked = sub.argmax(-1)
    for row in range(b):  # sampling only for rows that asked for it; each with its own generator
        if temperature[row] > 0:
            sel = (rb == row).nonzero().squeeze(-1)
            if sel.numel():
                picked[sel] = sample_tokens(sub[sel] - lse[sel, None], temperature[row], top_p[row], generators[row])
    # Every kind is scaled to (0, 1] so one threshold means the same for all:
    # entropy as exp(-H), 1 for a certain slot.
    kind = [confidence_kind[row] for row in rb.tolist()]
    prob = (sub.gather(-1, picked[:, None]).squeeze(-1) - lse).exp()
    picked_prob[rb, rl] = prob
    score = prob.clone()  # max_prob: the picked token's (the kinds below change it in place)
    if "margin" in kind:
        top2 = (sub.topk(2, dim=-1).values - lse[:, None]).exp()
        use = torch.tensor([k == "margin" for k in kind], device=sub.device)
        score = torch.where(use, top2[:, 0] - top2[:, 1], score)
    if "neg_entropy" in kind:
        use = torch.tensor([k == "neg_entropy" for k in kind], device=sub.device)
        logp = sub[use] - lse[use, None]
        score[use] = (logp.exp() * logp).nan_to_num(0.0).sum(-1).exp()
    tokens[rb, rl] = picked
    conf[rb, rl] = score


def _token_prob(logits: torch.Tensor, canvas: torch.Tensor, temp: torch.Tensor, special: SpecialIds) -> torch.Tensor:
    """[B, L] probability of each slot's current token (needs every slot's logits)."""
    full = logits.float() / temp[:, None, None]
    if special.banned:
        full[..., list(special.banned)] = float("-inf")
    current = canvas.clamp(min=0)
    return (full.gather(-1, current[..., None]).squeeze(-1) - full.logsumexp(-1)).exp()
