"""A deterministic stream of training batches: batch k depends only on (seed, k).

So the data position of a run is just its step counter, and a resumed run sees
exactly the batches the uninterrupted run would have seen.

Each batch is one decoder state (holes.py) at one canvas length, drawn with
the weights in STATES: the engine's first 8-slot canvas for every fill, the
doubled canvases (16..128) with their committed head, oracle-length canvases
(any length 1..128, the fill exactly filling it) and a few oversized buckets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch.utils.data

from .canvas import Batch, SpecialIds, collate, sample_example
from .holes import MAX_HOLE, HoleSampler
from .token_data import TokenCorpus

# (mode, canvas length; 0 = the length of a naturally sampled hole) -> weight
STATES = {
    ("first", 8): 0.28,
    ("grown", 16): 0.18,
    ("grown", 32): 0.13,
    ("grown", 64): 0.08,
    ("grown", 128): 0.05,
    ("oracle", 0): 0.18,
    ("loose", 16): 0.04,
    ("loose", 32): 0.04,
    ("loose", 64): 0.02,
}


@dataclass
class StreamConfig:
    batch_size: int = 16
    context_budget: int = 256  # max context tokens (suffix + prefix + 2 markers)
    seed: int = 0
    states: dict = field(default_factory=lambda: dict(STATES))


class BatchStream:
    def __init__(self, corpus: TokenCorpus, sampler: HoleSampler, ids: SpecialIds, cfg: StreamConfig) -> None:
        self.corpus, self.sampler, self.ids, self.cfg = corpus, sampler, ids, cfg
        self.file_p = corpus.file_weights()
        self.states = list(cfg.states)
        w = np.asarray([cfg.states[s] for s in self.states], dtype=np.float64)
        self.state_p = w / w.sum()

    def _oracle_length(self, rng: np.random.Generator) -> int:
        """The length of a naturally drawn hole, so oracle canvases follow real fill lengths."""
        f = self.corpus.file(int(rng.choice(self.corpus.num_files, p=self.file_p)))
        return min(MAX_HOLE, self.sampler.sample(rng, f, "first", 8).length)

    def batch(self, step: int, with_mask: bool = True) -> Batch:
        rng = np.random.default_rng([self.cfg.seed, step])
        mode, canvas_len = self.states[int(rng.choice(len(self.states), p=self.state_p))]
        if canvas_len == 0:
            canvas_len = self._oracle_length(rng)
        examples = [sample_example(rng, self.corpus, self.sampler, self.ids, mode, canvas_len,
                                   self.cfg.context_budget - 2, self.file_p)
                    for _ in range(self.cfg.batch_size)]
        return collate(examples, self.ids.pad, with_mask)


class StepBatches(torch.utils.data.Dataset):
    """Batches k = start, start+1, ... for a DataLoader: workers build them in parallel, in order."""

    def __init__(self, stream: BatchStream, start: int, stop: int) -> None:
        self.stream, self.start, self.stop = stream, start, stop

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __getitem__(self, i: int) -> Batch:
        return self.stream.batch(self.start + i, with_mask=False)
