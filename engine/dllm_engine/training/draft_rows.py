"""Train the draft rows' adapter (draft_adapter.py) of a pretrained base, on a CPU.

One step, per sequence of real code laid out as the engine reads it (`bos <suffix
marker> suffix <prefix marker> prefix middle end`):
1. the frozen base runs the real tokens causally, without gradients: their K/V,
   and its next-token distribution at every row (the teacher);
2. at anchors in the prefix's tail and the middle, `rows` draft rows follow the
   anchor (mask inputs at the next positions, seeing the real tokens up to the
   anchor and the draft rows before them, as in the engine's pass); draft row k
   predicts the token at anchor + k + 1, and its target is the base's own
   distribution there under teacher forcing (KL), which is what the base would
   commit if the tokens before were right;
3. only the draft rows run with gradients, and only the adapter learns.
So the costly part (the real tokens) is a forward without a graph, and every draft
row carries a dense target. Resumable: the adapter and optimiser state are saved
to the run folder; the loss and the held-out top-1 agreement per row go to a CSV.

`python -m dllm_engine.training.draft_rows --run runs/drafts --minutes 120`
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import draft_adapter
from ..layout import causal_mask
from .distill_run import DistillRun
from .draft_rows_args import add_arguments

FIELDS = ["split", "step", "seconds", "lr", "loss", "agree_1", "agree_2", "agree_3", "agree_4", "rows_per_s"]


def sample_sequence(rng: random.Random, files: list[str], tok, cfg, suffix_max: int, prefix_max: int,
                    middle_max: int) -> list[int] | None:
    """One training sequence in the engine's layout, cut from a random window of a file at
    line boundaries, with the middle's length (1 to `middle_max` tokens) as of a line fill."""
    path = rng.choice(files)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines(keepends=True)
    if len(lines) < 8:
        return None
    at = rng.randrange(2, len(lines) - 2)
    span = rng.choice((1, 1, 1, 2, 3))
    prefix = "".join(lines[max(0, at - 60):at])
    middle = "".join(lines[at:at + span])
    suffix = "".join(lines[at + span:at + span + 30])
    if not middle.strip():
        return None
    p_ids = tok.encode(prefix)[-prefix_max:]
    m_ids = tok.encode(middle)[:middle_max]
    s_ids = tok.encode(suffix)[:rng.randrange(0, suffix_max + 1)]
    if len(p_ids) < 16 or len(m_ids) < 2:
        return None
    bos = [cfg.bos_token_id] if cfg.bos_token_id >= 0 else []
    return [*bos, cfg.suffix_token_id, *s_ids, cfg.prefix_token_id, *p_ids, *m_ids, cfg.eos_token_id]


def anchors_of(rng: random.Random, length: int, rows: int, count: int, tail: int) -> list[int]:
    """Anchor positions in the last `tail` tokens (each with `rows` + 1 real tokens after it)."""
    last = length - rows - 2
    first = max(1, last - tail)
    if last <= first:
        return []
    return sorted(rng.sample(range(first, last + 1), min(count, last - first + 1)))


def draft_batch(seqs: list[list[int]], anchors: list[list[int]], rows: int, mask_id: int,
                device: torch.device | str = "cpu"):
    """The draft rows of a batch (padded to the longest sequence, left-aligned): ids, positions,
    mask [B, 1, R, S + R] (real tokens up to the anchor, the group's earlier draft rows), and the
    teacher row of each draft row (the real row at the same position). A padding row sees only
    itself (a row that sees nothing is NaN in some attention kernels, and NaN times a zero
    gradient is still NaN); it carries no loss. Built as whole tensors: a GPU batch has ~10^4
    draft rows, too many for a Python loop per row."""
    b = len(seqs)
    s = max(len(q) for q in seqs)
    groups = max(len(a) for a in anchors)
    r = groups * rows
    anchor = torch.full((b, groups), -1, dtype=torch.long)
    for i, group in enumerate(anchors):
        anchor[i, :len(group)] = torch.tensor(group, dtype=torch.long)
    anchor = anchor.to(device)
    k = torch.arange(rows, device=device)
    row_anchor = anchor[:, :, None].expand(b, groups, rows).reshape(b, r)  # -1: padding
    used = row_anchor >= 0
    pos = torch.where(used, (anchor[:, :, None] + 1 + k).reshape(b, r), torch.zeros_like(row_anchor))
    ids = torch.full((b, r), mask_id, dtype=torch.long, device=device)
    real = torch.arange(s, device=device)[None, None, :] <= row_anchor[:, :, None]  # [B, R, S]
    row = torch.arange(r, device=device)
    same_group = (row[:, None] // rows == row[None, :] // rows) & (row[None, :] <= row[:, None])  # [R, R]
    drafts = same_group[None] & used[:, :, None]
    drafts = drafts | (torch.eye(r, dtype=torch.bool, device=device)[None] & ~used[:, :, None])
    mask = torch.cat([real, drafts], dim=-1)[:, None]
    return ids, pos, mask, used, pos.clone()


class DraftTrainer(DistillRun):
    FIELDS = FIELDS

    @property
    def learner(self):
        return self.adapter

    def __init__(self, args) -> None:
        self.args = args
        loaded = self.load_frozen_base(args.base_adapter)
        self.adapter = draft_adapter.load(self.run / "adapter")
        if self.adapter is None:
            self.adapter = draft_adapter.init_from_base(self.model, self.cfg.mask_token_id, args.rank, args.rows)
            self.adapter.config.base = self.cfg.extra.get("base", "")
            self.adapter.config.base_key = loaded.path.name
        self.adapter.to(self.device).train()
        self.model.draft_adapter = self.adapter
        self.opt = torch.optim.AdamW(self.adapter.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
        self.resume()
        self.split_corpus()
        self.rng = random.Random(args.seed + self.step)
        self.held = self.held_out_sequences(args.held, "draft rows")

    def _sample(self, rng, files):
        a = self.args
        return sample_sequence(rng, files, self.tok, self.cfg, a.suffix_max, a.prefix_max, a.middle_max)

    def losses(self, seqs: list[list[int]], rng: random.Random):
        """(mean KL over draft rows, top-1 agreement per row [rows]) for a batch of sequences."""
        a, cfg, model, dev = self.args, self.cfg, self.model, self.device
        rows = self.adapter.config.rows
        anchors = [anchors_of(rng, len(q), rows, a.anchors, a.tail) for q in seqs]
        keep = [i for i, g in enumerate(anchors) if g]
        seqs, anchors = [seqs[i] for i in keep], [anchors[i] for i in keep]
        b, s = len(seqs), max(len(q) for q in seqs)
        real = torch.full((b, s), cfg.eos_token_id, dtype=torch.long)
        for i, q in enumerate(seqs):
            real[i, :len(q)] = torch.tensor(q)
        real = real.to(dev)
        ids, pos, mask, used, teacher_at = draft_batch(seqs, anchors, rows, cfg.mask_token_id, dev)
        want = torch.zeros((b, s), dtype=torch.bool, device=dev)
        want.scatter_(1, teacher_at, used)
        with torch.no_grad():
            positions = torch.arange(s, device=dev)[None].expand(b, -1)
            t_logits, kv = model(real, positions, mask=causal_mask(0, s, real.device), return_kv=True,
                                 logits_rows=want)
        # The teacher row for every draft row, in the draft rows' order.
        teacher = t_logits[torch.arange(b, device=dev)[:, None].expand_as(teacher_at), teacher_at][used].float()
        logits, _ = model(ids, pos, mask=mask, past=kv, logits_rows=used, compact=True, draft_rows=used)
        logp = F.log_softmax(logits.float(), -1)
        t_logp = F.log_softmax(teacher, -1)
        kl = (t_logp.exp() * (t_logp - logp)).sum(-1)
        agree = (logits.argmax(-1) == teacher.argmax(-1)).float()
        k_of = torch.arange(ids.shape[1], device=dev)[None].expand(b, -1)[used] % rows
        hits = torch.zeros(rows, device=dev).index_add_(0, k_of, agree)
        counts = torch.bincount(k_of, minlength=rows).float()
        per_row = [h / c if c else float("nan") for h, c in zip(hits.tolist(), counts.tolist())]  # one sync
        return kl.mean(), per_row, int(used.sum())

    def held_out(self) -> tuple[float, list[float]]:
        self.adapter.eval()
        rng = random.Random(99)
        kls, agrees = [], []
        with torch.no_grad():
            for i in range(0, len(self.held), self.args.batch):
                kl, per_row, _ = self.losses(self.held[i:i + self.args.batch], rng)
                kls.append(float(kl))
                agrees.append(per_row)
        self.adapter.train()
        return sum(kls) / len(kls), [sum(r[k] for r in agrees) / len(agrees) for k in range(len(agrees[0]))]

    def save(self, held: tuple[float, list[float]] | None = None) -> None:
        cfg = self.adapter.config
        corpus = ", ".join(self.args.corpus) if self.args.corpus else "the standard library (corpus.py's manifest)"
        where = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        cfg.trained = {"steps": self.step, "seconds": round(self.seconds), "corpus": corpus,
                       "device": where, "batch": self.args.batch,
                       "objective": "KL to the frozen base's next-token distribution at each draft row's slot",
                       **({"held_out_kl": round(held[0], 4), "held_out_agreement": [round(x, 4) for x in held[1]]}
                          if held else (cfg.trained or {}))}
        self.adapter.save(self.run / "adapter")
        torch.save({"opt": self.opt.state_dict(), "step": self.step, "seconds": self.seconds}, self.run / "state.pt")

    def train_loss(self, seqs: list[list[int]]):
        kl, agree, n = self.losses(seqs, self.rng)
        return kl, {f"agree_{k + 1}": v for k, v in enumerate(agree)}, n

    @staticmethod
    def held_row(held: tuple[float, list[float]]) -> dict:
        return {"loss": held[0], **{f"agree_{k + 1}": v for k, v in enumerate(held[1])}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    return run(args)


def evaluate(trainer: "DraftTrainer", folders: list[str]) -> None:
    """Each adapter folder's held-out KL and agreement per row, on the same fixed held-out
    sequences of this machine's corpus: a paired comparison (an adapter trained elsewhere
    reports figures on that corpus's held-out files)."""
    adapters = []
    for folder in folders:
        adapter = draft_adapter.load(Path(folder), device=trainer.device)
        if adapter is None:
            raise SystemExit(f"{folder}: no {draft_adapter.CONFIG_FILE}")
        adapters.append(adapter)
    width = max(a.config.rows for a in adapters)
    print(f"{len(trainer.held)} held-out sequences; top-1 agreement with the base per draft row")
    print("| adapter | rank | steps | held-out KL | " + " | ".join(f"row {k + 1}" for k in range(width)) + " |")
    print("|---|---|---|---|" + "---|" * width)
    for folder, adapter in zip(folders, adapters):
        trainer.adapter = trainer.model.draft_adapter = adapter
        kl, agree = trainer.held_out()
        cells = [f"{x:.1%}" for x in agree] + ["-"] * (width - len(agree))
        steps = (adapter.config.trained or {}).get("steps", "?")
        print(f"| {folder} | {adapter.config.rank} | {steps} | {kl:.3f} | " + " | ".join(cells) + " |", flush=True)


def run(args) -> int:
    torch.set_num_threads(args.threads or 1)
    torch.backends.cuda.matmul.allow_tf32 = True  # the adapter's fp32 matmuls on a GPU
    trainer = DraftTrainer(args)
    if getattr(args, "evaluate", None):
        evaluate(trainer, args.evaluate)
        return 0
    trainer.train()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
