"""What the CPU distillation runs of a base's helpers share (draft_rows.py's adapter,
draft_head.py's head): the learning-rate schedule and the loss curve's CSV."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

from .corpus import build_manifest, default_roots


class DistillRun:
    """Mixed into a trainer that has `args` (lr, warmup, decay_minutes, corpus), `step`,
    `seconds`, `run` (its folder) and `_sample(rng, files)` (one sequence or None), and names
    its CSV columns in FIELDS."""

    FIELDS: list[str] = []

    def split_corpus(self) -> None:
        """`train_files` and `held_files` from the corpus manifest (--corpus, or the standard
        library); a corpus too small to hold any file out holds out its last one."""
        a = self.args
        manifest = build_manifest([Path(r) for r in a.corpus] if a.corpus else default_roots())
        self.train_files, self.held_files = manifest["train"], manifest["heldout"]
        if not self.held_files:
            self.train_files, self.held_files = self.train_files[:-1], self.train_files[-1:]

    def held_out_sequences(self, count: int, what: str) -> list[list[int]]:
        """`count` fixed held-out sequences; on a small corpus whose held-out files are too short
        to give them (the split hashes paths, so it differs per checkout), more files are held out."""
        while True:
            rng = random.Random(1234)
            held = [s for s in (self._sample(rng, self.held_files) for _ in range(3 * count)) if s][:count]
            if len(held) >= count or len(self.train_files) <= 1:
                if not held:
                    raise SystemExit(f"{what} training: the corpus gives no held-out sequence (too few or too short files)")
                return held
            self.held_files.append(self.train_files.pop())

    def lr_at(self) -> float:
        """Linear warm-up over `warmup` steps, then a cosine over `decay_minutes` of training
        time (not steps: a resumed run on a faster or busier machine keeps its schedule) to a tenth."""
        a = self.args
        warm = min(1.0, (self.step + 1) / a.warmup)
        frac = min(1.0, self.seconds / max(1.0, a.decay_minutes * 60))
        return a.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))

    def log(self, row: dict) -> None:
        """One row of the loss curve (`loss.csv` in the run folder, appended) and on stdout."""
        path = self.run / "loss.csv"
        new = not path.exists()
        with path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.FIELDS, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in row.items()})
        print(json.dumps(row), flush=True)
