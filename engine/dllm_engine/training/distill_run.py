"""What the CPU distillation runs of a base's helpers share (draft_rows.py's adapter,
draft_head.py's head): the learning-rate schedule and the loss curve's CSV."""

from __future__ import annotations

import csv
import json
import math


class DistillRun:
    """Mixed into a trainer that has `args` (lr, warmup, decay_minutes), `step`, `seconds`
    and `run` (its folder), and names its CSV columns in FIELDS."""

    FIELDS: list[str] = []

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
