"""A deterministic stream of training batches: batch k depends only on (seed, k).

So the data position of a run is just its step counter, and a resumed run sees
exactly the batches the uninterrupted run would have seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .canvas import Batch, SpecialIds, collate, sample_example
from .holes import BUCKETS, HoleSampler
from .token_data import TokenCorpus

# How often each canvas length is trained; short fills dominate editor use.
BUCKET_WEIGHTS = {8: 0.25, 16: 0.30, 32: 0.25, 64: 0.12, 128: 0.08}
MODE_WEIGHTS = {"fit": 0.70, "loose": 0.15, "trunc": 0.15}


@dataclass
class StreamConfig:
    batch_size: int = 16
    context_budget: int = 256  # max context tokens (suffix + prefix + 2 markers)
    seed: int = 0
    buckets: dict[int, float] = field(default_factory=lambda: dict(BUCKET_WEIGHTS))


class BatchStream:
    def __init__(self, corpus: TokenCorpus, sampler: HoleSampler, ids: SpecialIds, cfg: StreamConfig) -> None:
        bad = [b for b in cfg.buckets if b not in BUCKETS]
        if bad:
            raise ValueError(f"canvas buckets must be among {BUCKETS}, got {bad}")
        self.corpus, self.sampler, self.ids, self.cfg = corpus, sampler, ids, cfg
        self.file_p = corpus.file_weights()
        self.bucket_list = list(cfg.buckets)
        w = np.asarray([cfg.buckets[b] for b in self.bucket_list], dtype=np.float64)
        self.bucket_p = w / w.sum()
        self.modes = list(MODE_WEIGHTS)
        self.mode_p = np.asarray([MODE_WEIGHTS[m] for m in self.modes])

    def batch(self, step: int) -> Batch:
        rng = np.random.default_rng([self.cfg.seed, step])
        canvas_len = self.bucket_list[int(rng.choice(len(self.bucket_list), p=self.bucket_p))]
        examples = []
        for _ in range(self.cfg.batch_size):
            mode = self.modes[int(rng.choice(len(self.modes), p=self.mode_p))]
            examples.append(sample_example(rng, self.corpus, self.sampler, self.ids, mode, canvas_len,
                                           self.cfg.context_budget - 2, self.file_p))
        return collate(examples, self.ids.pad)
