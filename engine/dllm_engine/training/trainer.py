"""The training loop: AdamW, warmup + cosine, resumable state, loss curve, native exports.

A run directory holds `state.pt` (model, optimizer, step, tokens, seconds: the
data position is the step, see batches.py), `loss.csv` and its plot,
`last/` and `best/` (native checkpoints: config.json, bf16 model.safetensors,
tokenizer.json; best = lowest held-out masked cross-entropy).
The schedule's progress is max(step / max_steps, seconds / time_budget), so a
run given a wall-clock budget still ends with a decayed learning rate.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..checkpoint import save_native
from ..model import DiffusionTransformer
from ..model_config import ModelConfig
from .batches import BatchStream, StepBatches, StreamConfig
from .canvas import SpecialIds
from .holes import HoleSampler
from .loss_curve import LossLog, plot
from .objective import LossConfig, diffusion_loss, hidden_states
from .token_data import TokenCorpus

STATE_FILE = "state.pt"


@dataclass
class TrainConfig:
    out_dir: Path
    data_dir: Path
    tokenizer: Path
    heldout_dir: Path | None = None
    model: dict = field(default_factory=dict)  # ModelConfig overrides of the default shape
    stream: StreamConfig = field(default_factory=StreamConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    max_steps: int = 100_000
    time_budget_s: float | None = None
    save_every_s: float = 300.0
    log_every: int = 10
    eval_every: int = 200
    eval_batches: int = 8
    device: str = "auto"
    threads: int = 1
    compile: bool = False
    workers: int = 0  # DataLoader processes building batches (GPU runs); 0 builds them in the loop
    init_from: Path | None = None  # a native checkpoint to continue from (weights only; fresh optimizer and schedule)
    cpu_bf16: bool = False  # bf16 autocast on CPU (fast where the CPU has bf16 matmuls, e.g. AVX512-BF16/AMX)


def lr_at(cfg: TrainConfig, step: int, seconds: float) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
    if cfg.time_budget_s:
        progress = max(progress, seconds / cfg.time_budget_s)
    progress = min(1.0, progress)
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class Trainer:
    def __init__(self, cfg: TrainConfig) -> None:
        from ..default_model_config import default_model_config
        from ..tokenizer import TextTokenizer

        self.cfg = cfg
        self.device = pick_device(cfg.device)
        if self.device.type == "cpu":
            torch.set_num_threads(cfg.threads)
        tok = TextTokenizer(cfg.tokenizer)
        self.model_cfg: ModelConfig = default_model_config(tok, **cfg.model)
        # The engine trims a request's context to what the model was trained on (runner.py).
        self.model_cfg.extra["context_tokens"] = cfg.stream.context_budget
        self.ids = SpecialIds(pad=self.model_cfg.pad_token_id, mask=self.model_cfg.mask_token_id,
                              suffix=self.model_cfg.suffix_token_id, prefix=self.model_cfg.prefix_token_id)
        vocab = tok._tok.get_vocab()
        corpus = TokenCorpus.open(cfg.data_dir)
        self.sampler = HoleSampler.from_vocab(vocab, corpus.newline_id)
        self.stream = BatchStream(corpus, self.sampler, self.ids, cfg.stream)
        self.heldout = None
        if cfg.heldout_dir is not None:
            held_cfg = StreamConfig(**{**asdict(cfg.stream), "seed": 987_654})
            self.heldout = BatchStream(TokenCorpus.open(cfg.heldout_dir), self.sampler, self.ids, held_cfg)
        torch.manual_seed(cfg.stream.seed)
        self.model = DiffusionTransformer(self.model_cfg).to(self.device)
        self.model.use_kernels("torch")  # the Triton kernels are inference-only (no backward)
        self._init_weights()
        self.previous = self._load_init(cfg.init_from) if cfg.init_from else None
        decay = [p for n, p in self.model.named_parameters() if p.dim() >= 2]
        no_decay = [p for n, p in self.model.named_parameters() if p.dim() < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}],
                                     lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8)
        self.step, self.tokens, self.seconds, self.best = 0, 0, 0.0, float("inf")
        self.log = LossLog(cfg.out_dir / "loss.csv")
        self.hidden_fn = torch.compile(hidden_states, dynamic=True) if cfg.compile else hidden_states

    def _init_weights(self) -> None:
        std = 0.02
        for name, p in self.model.named_parameters():
            if p.dim() >= 2:
                # residual outputs scaled down with depth (GPT-2) so the stream starts near identity
                scale = 1 / math.sqrt(2 * self.model_cfg.num_layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else 1.0
                torch.nn.init.normal_(p, std=std * scale)

    def _load_init(self, path: Path) -> dict:
        """Start from a trained native checkpoint of the same shape; returns its training facts."""
        from ..checkpoint import load

        loaded = load(str(path), device="cpu", dtype=torch.float32)
        if loaded.config.hidden_size != self.model_cfg.hidden_size or loaded.config.num_layers != self.model_cfg.num_layers:
            raise SystemExit(f"--init {path}: its shape differs from the run's model; pass the same --hidden/--layers")
        self.model.load_state_dict(loaded.model.state_dict())
        facts_file = Path(path) / "training.json"
        facts = json.loads(facts_file.read_text()) if facts_file.exists() else {}
        total = facts.get("previous") or {}
        return {"path": str(path), "step": facts.get("step", 0) + total.get("step", 0),
                "tokens": facts.get("tokens", 0) + total.get("tokens", 0),
                "seconds": facts.get("seconds", 0.0) + total.get("seconds", 0.0)}

    # -- state --------------------------------------------------------------
    def save_state(self) -> None:
        out = self.cfg.out_dir
        out.mkdir(parents=True, exist_ok=True)
        state = {"model": self.model.state_dict(), "opt": self.opt.state_dict(), "step": self.step,
                 "tokens": self.tokens, "seconds": self.seconds, "best": self.best,
                 "model_config": asdict(self.model_cfg)}
        tmp = out / (STATE_FILE + ".tmp")
        torch.save(state, tmp)
        tmp.replace(out / STATE_FILE)
        self.export(out / "last")

    def load_state(self) -> bool:
        path = self.cfg.out_dir / STATE_FILE
        if not path.exists():
            return False
        state = torch.load(path, map_location=self.device, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.step, self.tokens, self.seconds, self.best = state["step"], state["tokens"], state["seconds"], state["best"]
        self.log.truncate_after(self.step)
        return True

    def export(self, directory: Path) -> None:
        tmp = directory.with_name(directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        save_native(self.model, tmp)
        shutil.copy(self.cfg.tokenizer, tmp / "tokenizer.json")
        (tmp / "training.json").write_text(json.dumps(
            {"step": self.step, "tokens": self.tokens, "seconds": round(self.seconds, 1),
             "best_heldout_masked_ce": self.best, "device": str(self.device),
             "context_budget": self.cfg.stream.context_budget, "batch_size": self.cfg.stream.batch_size,
             "lr": self.cfg.lr, "warmup_steps": self.cfg.warmup_steps, "min_lr_ratio": self.cfg.min_lr_ratio,
             "weight_decay": self.cfg.weight_decay, "aux_weight": self.cfg.loss.aux_weight,
             "aux_fraction": self.cfg.loss.aux_fraction,
             "bf16_autocast": self.device.type == "cuda" or self.cfg.cpu_bf16,
             **({"previous": self.previous} if self.previous else {})},
            indent=1) + "\n")
        shutil.rmtree(directory, ignore_errors=True)
        tmp.replace(directory)

    # -- loop ---------------------------------------------------------------
    def _autocast(self):
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.cpu_bf16)

    def batches(self):
        """Batches from the current step on; on a GPU built ahead by worker processes."""
        if self.cfg.workers > 0:
            loader = torch.utils.data.DataLoader(StepBatches(self.stream, self.step, self.cfg.max_steps),
                                                 batch_size=None, num_workers=self.cfg.workers, prefetch_factor=4)
            yield from loader
        else:
            while True:
                yield self.stream.batch(self.step, with_mask=False)

    def train_step(self, batch=None) -> dict:
        batch = (batch if batch is not None else self.stream.batch(self.step, with_mask=False)).to(self.device)
        gen = torch.Generator().manual_seed(self.cfg.stream.seed * 1_000_003 + self.step)
        lr = lr_at(self.cfg, self.step, self.seconds)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.model.train()
        with self._autocast():
            loss, stats = diffusion_loss(self.model, batch, gen, self.ids.mask, self.cfg.loss, self.hidden_fn)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.step += 1
        self.tokens += batch.num_tokens
        return {**stats, "lr": lr}

    @torch.no_grad()
    def evaluate(self) -> dict:
        self.model.eval()
        totals: dict[str, float] = {}
        for k in range(self.cfg.eval_batches):
            batch = self.heldout.batch(k, with_mask=False).to(self.device)
            gen = torch.Generator().manual_seed(k)
            with self._autocast():
                _, stats = diffusion_loss(self.model, batch, gen, self.ids.mask, self.cfg.loss)
            for key, v in stats.items():
                totals[key] = totals.get(key, 0.0) + v / self.cfg.eval_batches
        return totals

    def run(self, on_log=print) -> None:
        cfg = self.cfg
        cfg.out_dir.mkdir(parents=True, exist_ok=True)
        last_save = time.monotonic()
        window_t, window_tok = time.monotonic(), self.tokens
        for batch in self.batches():
            if self.step >= cfg.max_steps or (cfg.time_budget_s and self.seconds >= cfg.time_budget_s):
                break
            t0 = time.monotonic()
            stats = self.train_step(batch)
            self.seconds += time.monotonic() - t0
            if self.step % cfg.log_every == 0:
                now = time.monotonic()
                rate = (self.tokens - window_tok) / max(1e-9, now - window_t)
                window_t, window_tok = now, self.tokens
                row = {"split": "train", "step": self.step, "tokens": self.tokens, "seconds": self.seconds,
                       "tokens_per_s": rate, **stats}
                self.log.append(row)
                on_log(row)
            if self.heldout is not None and self.step % cfg.eval_every == 0:
                self._evaluate_and_keep_best(on_log)
            if time.monotonic() - last_save >= cfg.save_every_s:
                self.save_state()
                plot(self.log.path, cfg.out_dir / "loss")
                last_save = time.monotonic()
        if self.heldout is not None and self.step % cfg.eval_every != 0:
            self._evaluate_and_keep_best(on_log)
        self.save_state()
        plot(self.log.path, cfg.out_dir / "loss")

    def _evaluate_and_keep_best(self, on_log) -> None:
        ev = self.evaluate()
        row = {"split": "heldout", "step": self.step, "tokens": self.tokens, "seconds": self.seconds, **ev}
        self.log.append(row)
        on_log(row)
        if ev["masked_ce"] < self.best:
            self.best = ev["masked_ce"]
            self.export(self.cfg.out_dir / "best")
