"""Recommended per-family decoding defaults (one table; docs/models.md mirrors it).

Sources: each family's published sampler settings (anchors.md and the model cards),
adapted to completion in an editor: greedy (temperature 0) so a completion is
reproducible, Fast-dLLM's 0.9 confidence threshold where the family decodes in
parallel, one token per pass (threshold 1.0) where the family's length edits
need it (DreamOn). `refresh_every` is the approximate context cache's schedule
for bidirectional families (1 = exact, recompute every pass); block families'
cache is exact whatever it says.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import CONFIDENCE_KINDS


@dataclass(frozen=True)
class FamilyDefaults:
    threshold: float
    temperature: float
    confidence: str
    buckets: tuple[int, ...]
    refresh_every: int
    note: str

    def __post_init__(self) -> None:
        if self.confidence not in CONFIDENCE_KINDS:
            raise ValueError(f"unknown confidence kind {self.confidence!r}")


_FIM = (8, 16, 32, 64)
DEFAULTS: dict[str, FamilyDefaults] = {
    "native": FamilyDefaults(0.9, 0.0, "max_prob", (8, 16, 32, 64, 128), 1, "exact context cache by construction"),
    "llada": FamilyDefaults(0.9, 0.0, "max_prob", _FIM, 4, "LLaDA low_confidence remasking; Fast-dLLM threshold 0.9"),
    "dream": FamilyDefaults(0.9, 0.0, "neg_entropy", _FIM, 4, "Dream's recommended alg is 'entropy'"),
    "diffucoder": FamilyDefaults(0.9, 0.0, "neg_entropy", _FIM, 4, "entropy alg; model card samples at T=0.3, greedy for completion"),
    "dreamon": FamilyDefaults(1.0, 0.0, "neg_entropy", (4,), 4, "starts at 4 masks, grows to 64 by [expand]; one token per pass"),
    "open_dcoder": FamilyDefaults(0.9, 0.0, "max_prob", _FIM, 4, "official eval: alg p2 (max prob), T=0.6, 64 steps"),
    "coda": FamilyDefaults(0.9, 0.0, "neg_entropy", _FIM, 4, "CoDA's sampler is entropy-ordered"),
    "sdar": FamilyDefaults(0.9, 0.0, "max_prob", (4, 8, 16, 32, 64), 1, "low_confidence_dynamic, threshold 0.85-0.9, block 4"),
    "fast_dllm_v2": FamilyDefaults(0.9, 0.0, "max_prob", (32, 64), 1, "threshold 0.9 in blocks of 32 (sub-blocks of 8)"),
    # transformers' DiffusionGemmaGenerationConfig defaults: EntropyBoundSampler(entropy_bound=0.1) accepts the
    # lowest-entropy slots (per slot exp(-H) >= exp(-0.1) = 0.905), canvas_length 256, 48 steps, T 0.8 -> 0.4.
    "diffusion_gemma": FamilyDefaults(0.9, 0.0, "neg_entropy", (256,), 1,
                                      "entropy bound 0.1, canvas 256 (capped by max_tokens), 48 steps, T 0.8->0.4; exact prompt cache"),
}


def defaults_for(family: str) -> FamilyDefaults:
    try:
        return DEFAULTS[family]
    except KeyError:
        raise KeyError(f"no decoding defaults for family {family!r}; known: {sorted(DEFAULTS)}") from None
