"""Sampling processes for the distillation runs (--workers): on a GPU a step takes about as
long as cutting its batch (~1 ms a sequence: reading a file and tokenizing ~90 lines), so
batches are cut beside the training process, each from its own seed."""

from __future__ import annotations

import collections
import multiprocessing
import random
from pathlib import Path
from types import SimpleNamespace

_WORKER: dict = {}
# The layout's token ids a sequence needs (draft_rows.sample_sequence reads them from the config).
LAYOUT_IDS = ("bos_token_id", "suffix_token_id", "prefix_token_id", "eos_token_id")


def _worker_init(tokenizer: str, ids: dict, limits: tuple[int, int, int], files: list[str], batch: int) -> None:
    from ..tokenizer import TextTokenizer

    _WORKER.update(tok=TextTokenizer(Path(tokenizer)), cfg=SimpleNamespace(**ids), limits=limits, files=files,
                   batch=batch)


def _worker_batch(seed: int) -> list[list[int]]:
    from .draft_rows import sample_sequence  # here: draft_rows imports distill_run, which imports this

    w, rng = _WORKER, random.Random(seed)
    seqs = (sample_sequence(rng, w["files"], w["tok"], w["cfg"], *w["limits"]) for _ in range(2 * w["batch"]))
    return [s for s in seqs if s][:w["batch"]]


class SamplingPool:
    """`workers` spawned processes, 2 batches each in flight. Seeds follow from the run's seed
    and its step, so a resumed run draws new batches."""

    def __init__(self, workers: int, tokenizer: Path, cfg, limits: tuple[int, int, int], files: list[str],
                 batch: int, seed: int, step: int) -> None:
        ids = {k: getattr(cfg, k) for k in LAYOUT_IDS}
        self.workers = workers
        self.pool = multiprocessing.get_context("spawn").Pool(
            workers, initializer=_worker_init, initargs=(str(tokenizer), ids, limits, files, batch))
        self.pending: collections.deque = collections.deque()
        self.seed = (seed + 1) * 1_000_003 + step * 4099

    def next_batch(self) -> list[list[int]]:
        while len(self.pending) < 2 * self.workers:
            self.pending.append(self.pool.apply_async(_worker_batch, (self.seed,)))
            self.seed += 1
        return self.pending.popleft().get()

    def close(self) -> None:
        self.pool.terminate()
