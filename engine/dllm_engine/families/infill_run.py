"""A minimal denoising loop over a FamilyRunner: threshold commits on max probability
(Fast-dLLM's rule, at least one slot per pass), DreamOn length edits, end tokens.

The resident engine has its own loop and denoiser; this one exists so families can
be measured (benchmarks/bench_family_cache.py) and tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .family_runner import FamilyRunner
from .infill_layout import dreamon_edit

DREAMON_START = 4  # DreamOn starts from a few masks and grows with [expand]


@dataclass
class FillResult:
    tokens: list[list[int]]
    passes: int
    committed_per_pass: list[int] = field(default_factory=list)


@torch.inference_mode()
def run_infill(runner: FamilyRunner, holes: list[tuple[list[int], list[int]]], canvas_len: int,
               threshold: float = 0.9, max_passes: int = 1024) -> FillResult:
    cfg = runner.config
    mask, expand = cfg.mask_token_id, cfg.extra.get("expand_token_id")
    variable = cfg.extra.get("infill") == "expand"
    ends = set(cfg.extra.get("end_ids", [cfg.eos_token_id]))
    contexts = [runner.encode_context(p, s, canvas_len) for p, s in holes]
    canvases = [[mask] * (min(DREAMON_START, canvas_len) if variable else canvas_len) for _ in holes]
    passes, per_pass = 0, []
    while passes < max_passes and any(mask in c for c in canvases):
        width = max(len(c) for c in canvases)
        canv = torch.full((len(canvases), width), cfg.pad_token_id, dtype=torch.long, device=runner.device)
        for row, c in enumerate(canvases):
            canv[row, : len(c)] = torch.tensor(c, device=runner.device)
        lens = torch.tensor([len(c) for c in canvases], device=runner.device)
        logits = runner.canvas_logits(contexts, canv, lens).float()
        logits[..., mask] = float("-inf")
        if variable:
            full = (lens >= canvas_len)[:, None, None]
            logits[..., expand:expand + 1] = logits[..., expand:expand + 1].masked_fill(full, float("-inf"))
        conf, tok = logits.softmax(-1).max(-1)
        masked = (canv == mask) & (torch.arange(width, device=runner.device)[None] < lens[:, None])
        conf = conf.masked_fill(~masked, -1.0)
        commit = masked & (conf >= threshold)
        best = conf.argmax(-1)
        rows = masked.any(-1).nonzero().squeeze(-1)
        commit[rows, best[rows]] = True
        new = torch.where(commit, tok, canv).tolist()
        flags = commit.tolist()
        per_pass.append(int(commit.sum()))
        for row in range(len(canvases)):
            n = len(canvases[row])
            canvases[row] = dreamon_edit(new[row][:n], flags[row][:n], cfg, canvas_len) if variable else new[row][:n]
        passes += 1
    fills = []
    for c in canvases:
        out = []
        for t in c:
            if t in ends or t == mask:
                break
            out.append(t)
        fills.append(out)
    return FillResult(fills, passes, per_pass)
