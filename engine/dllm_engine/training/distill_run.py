"""What the distillation runs of a base's helpers (draft_rows.py's adapter, draft_head.py's
head) share, on a CPU or one GPU: the corpus split, the learning-rate schedule, the batches
(cut here or by sampling processes) and the loss curve's CSV."""

from __future__ import annotations

import csv
import json
import math
import random
import time
from pathlib import Path

import torch

from .corpus import build_manifest
from .packages import training_manifest


class DistillRun:
    """Mixed into a trainer that has `args` (lr, warmup, decay_minutes, corpus, minutes,
    max_steps, batch, log_every, eval_every), `step`, `seconds`, `run` (its folder), `opt`,
    `rng`, `learner` (the module that learns), with --workers `tok_path` and `cfg` (the
    tokenizer file and the layout's token ids the sampling processes need), and:
    - `_sample(rng, files)`: one training sequence, or None;
    - `train_loss(seqs)`: (loss, {column: value} of the step's metrics, rows it scored);
    - `held_out()`: the held-out figures, and `held_row(held)`: their CSV columns;
    - `save(held)`: the learner and optimiser state, in the run folder.
    FIELDS names the CSV columns; RATE the training rate's column."""

    FIELDS: list[str] = []
    RATE = "rows_per_s"

    def load_frozen_base(self, base_adapter: str = "none"):
        """Set up what every trainer starts from: the seed, the device (--device, "auto": CUDA
        when there is one), the base in bf16 with torch's kernels (Triton's are inference-only:
        no backward) with `base_adapter` attached (low_rank.attach: "none", "shipped" or a
        folder), every weight frozen, its tokenizer file, and the run folder. Returns the
        checkpoint.LoadedModel."""
        from ..checkpoint import load

        a = self.args
        torch.manual_seed(a.seed)
        self.device = torch.device(a.device if a.device != "auto" else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        loaded = load(a.model, device=self.device, dtype=torch.bfloat16)
        # A helper's teacher is the model as the engine runs it, its base adapter too: a head
        # distilled from the bare base guesses what the bare base writes.
        from ..low_rank import attach

        self.base_adapter = attach(loaded, base_adapter)
        self.model, self.cfg, self.tok = loaded.model, loaded.config, loaded.tokenizer
        self.tok_path = loaded.path / "tokenizer.json"
        self.model.use_kernels("torch")
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.run = Path(a.run)
        self.run.mkdir(parents=True, exist_ok=True)
        return loaded

    def resume(self) -> None:
        """`step`, `seconds` and the optimiser's state from the run folder's state.pt, if any."""
        state = self.run / "state.pt"
        self.step, self.seconds = 0, 0.0
        if state.exists():
            saved = torch.load(state, weights_only=True, map_location=self.device)
            self.opt.load_state_dict(saved["opt"])
            self.step, self.seconds = saved["step"], saved["seconds"]

    def split_corpus(self) -> None:
        """`train_files` and `held_files` from the corpus manifest (--corpus, or the standard
        library with --with-packages the permissive installed packages beside it); a corpus too
        small to hold any file out holds out its last one."""
        a = self.args
        if a.corpus:
            manifest = build_manifest([Path(r) for r in a.corpus])
        else:
            manifest = training_manifest(a.with_packages, a.package_cap_mb)  # every trainer takes corpus.OPTIONS
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

    def log_held(self):
        """Evaluate on the held-out sequences, log it, and return the figures (for save)."""
        held = self.held_out()
        self.log({"split": "heldout", "step": self.step, "seconds": self.seconds, **self.held_row(held)})
        return held

    def next_batch(self) -> list[list[int]]:
        """Up to `batch` training sequences: cut here, or with --workers by sampling processes
        (sampling_pool.py; the trainer's `tok_path` and `cfg` give them the tokenizer and layout)."""
        a = self.args
        if not getattr(a, "workers", 0):
            return [s for s in (self._sample(self.rng, self.train_files) for _ in range(2 * a.batch)) if s][:a.batch]
        if getattr(self, "_pool", None) is None:
            from .sampling_pool import SamplingPool

            self._pool = SamplingPool(a.workers, self.tok_path, self.cfg, (a.suffix_max, a.prefix_max, a.middle_max),
                                      self.train_files, a.batch, a.seed, self.step)
        return self._pool.next_batch()

    def train(self) -> None:
        """Steps until --minutes of wall time or --max-steps: a train row every --log-every
        steps (means over the window), held-out figures and a save every --eval-every."""
        try:
            self._train()
        finally:
            if getattr(self, "_pool", None) is not None:
                self._pool.close()
                self._pool = None

    def _train(self) -> None:
        a = self.args
        if self.step == 0:
            self.log_held()
        stop_at = time.monotonic() + a.minutes * 60
        window, rows, spent = [], 0, 0.0
        saved_at = None
        while time.monotonic() < stop_at and (a.max_steps is None or self.step < a.max_steps):
            t0 = time.perf_counter()
            seqs = self.next_batch()
            if not seqs:
                continue
            lr = self.lr_at()
            for g in self.opt.param_groups:
                g["lr"] = lr
            loss, metrics, n = self.train_loss(seqs)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.learner.parameters(), 1.0)
            self.opt.step()
            dt = time.perf_counter() - t0
            self.step += 1
            self.seconds += dt
            window.append({"loss": float(loss.detach()), **metrics})
            rows += n
            spent += dt
            if self.step % a.log_every == 0:
                means = {k: sum(w[k] for w in window) / len(window) for k in window[0]}
                self.log({"split": "train", "step": self.step, "seconds": self.seconds, "lr": lr, **means,
                          self.RATE: rows / max(1e-9, spent)})
                window, rows, spent = [], 0, 0.0
            if self.step % a.eval_every == 0:
                self.save(self.log_held())
                saved_at = self.step
        if saved_at != self.step:
            # Not when the last step was just evaluated and saved: the held-out pass again
            # would cost as much and write the same row twice.
            self.save(self.log_held())
