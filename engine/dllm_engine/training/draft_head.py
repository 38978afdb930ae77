"""Train a base's draft head (draft_head.py), distilled from the frozen base, on a CPU or one GPU.

One step, per batch of real code laid out as the engine reads it (draft_rows.sample_sequence:
`bos <suffix marker> suffix <prefix marker> prefix middle end`):
1. the frozen base runs the real tokens causally, without gradients, once: its final
   normed hidden state and its next-token distribution at every row of the tail (the
   engine's pass computes exactly these for the row it commits from);
2. at every anchor r of the tail, the head starts from the base's hidden state at r and
   folds in the real tokens x[r+1], x[r+2], ... one step each; step k's target is the
   base's own distribution at row r + k (what the base commits after those tokens),
   restricted to the head's vocabulary (soft cross-entropy);
3. only the head learns. The base's forward has no graph, and every anchor of the tail
   carries K dense targets, so a CPU hour trains on ~10^6 guesses.
Resumable: the head and optimiser state are saved in the run folder; the loss and the
held-out agreement per step (and the run of leading agreements, what a pass would
accept) go to a CSV.

`python -m dllm_engine.training.draft_head --run runs/head --minutes 90`
On one GPU (the shipped head: `benchmarks/gpu_draft_rows.sh train-head`): `--device cuda
--batch 64 --workers 6 --inner 768 --blocks 1 --lr 2e-3`, ~110 k anchors a second on an H200.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import draft_head
from ..layout import causal_mask
from .corpus import OPTIONS as CORPUS_OPTIONS
from .distill_run import DistillRun
from .draft_rows import sample_sequence
from .teacher_option import BASE_ADAPTER_OPTION

FIELDS = ["split", "step", "seconds", "lr", "loss", "agree_1", "agree_2", "agree_3", "agree_4", "accepted",
          "anchors_per_s"]


def add_arguments(p) -> None:
    for flag, kw in CORPUS_OPTIONS:
        p.add_argument(flag, **kw)
    p.add_argument("--model", default="default", help="the base (a name in bases/catalog.py, or 'default')")
    p.add_argument("--run", required=True, help="run folder (resumed when it holds a state)")
    p.add_argument(BASE_ADAPTER_OPTION[0], **BASE_ADAPTER_OPTION[1])
    p.add_argument("--init", default=None, help="a head folder to start from when the run holds none "
                   "(e.g. engine/dllm_engine/bases/heads/smollm2-135m, to refit the shipped head)")
    p.add_argument("--minutes", type=float, default=60.0, help="wall-clock budget of this run")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--decay-minutes", type=float, default=120.0, help="the learning rate's cosine length")
    p.add_argument("--steps", type=int, default=4, help="tokens guessed in a row")
    p.add_argument("--inner", type=int, default=1536)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--vocab", type=int, default=8192, help="the head's vocabulary (most frequent corpus tokens)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--tail", type=int, default=384, help="anchors are the last this many tokens")
    p.add_argument("--suffix-max", type=int, default=160)
    p.add_argument("--prefix-max", type=int, default=320)
    p.add_argument("--middle-max", type=int, default=48)
    p.add_argument("--held", type=int, default=16, help="held-out sequences (fixed)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto: the same recipe on one GPU takes a larger "
                   "--batch (benchmarks/gpu_draft_rows.sh train-head)")
    p.add_argument("--workers", type=int, default=0, help="sampling processes (0: sample in the training process)")


def corpus_counts(tok, files: list[str], vocab_size: int, limit: int = 400) -> torch.Tensor:
    """long [V]: token occurrences in (up to `limit` of) `files`, for the head's vocabulary."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for path in files[:limit]:
        try:
            ids = tok.encode(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        counts += torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=vocab_size)[:vocab_size]
    return counts


class HeadTrainer(DistillRun):
    FIELDS = FIELDS
    RATE = "anchors_per_s"

    @property
    def learner(self):
        return self.head

    def __init__(self, args) -> None:
        self.args = args
        loaded = self.load_frozen_base(args.base_adapter)
        self.model.keep_hidden = True
        self.split_corpus()
        embed = self.model.model.embed_tokens.weight
        self.head = draft_head.load(self.run / "head", embed)
        if self.head is None and args.init:
            self.head = draft_head.load(Path(args.init), embed)
            if self.head is None:
                raise SystemExit(f"--init {args.init}: no draft head there ({draft_head.CONFIG_FILE})")
            if self.head.config.hidden_size != self.cfg.hidden_size:
                raise SystemExit(f"--init {args.init}: a head for hidden size {self.head.config.hidden_size}, "
                                 f"the base has {self.cfg.hidden_size}")
        if self.head is None:
            counts = corpus_counts(self.tok, self.train_files, self.cfg.vocab_size)
            ids = draft_head.code_vocabulary(counts, args.vocab)
            hcfg = draft_head.DraftHeadConfig(self.cfg.hidden_size, inner=args.inner, blocks=args.blocks,
                                              steps=args.steps, vocab=int(ids.numel()),
                                              base=self.cfg.extra.get("base", ""), base_key=loaded.path.name)
            self.head = draft_head.DraftHead(hcfg, embed, ids)
        self.head.float().to(self.device).train()
        from ..cpu_features import native_bf16

        # bf16 products over fp32 master weights where the device multiplies bf16 natively
        self.autocast = self.device.type == "cuda" or native_bf16()
        # The base's head cut to the same tokens: the teacher's logits over the subset.
        self.sub_head = torch.nn.Linear(self.cfg.hidden_size, self.head.vocab_ids.numel(), bias=False)
        self.sub_head.weight = torch.nn.Parameter(embed.detach()[self.head.vocab_ids].clone(), requires_grad=False)
        params = [p for p in self.head.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
        self.resume()
        self.rng = random.Random(args.seed + self.step)
        self.held = self.held_out_sequences(args.held, "draft head")

    def _sample(self, rng, files):
        a = self.args
        return sample_sequence(rng, files, self.tok, self.cfg, a.suffix_max, a.prefix_max, a.middle_max)

    def teacher(self, seqs: list[list[int]], full: bool = False):
        """Per sequence (hidden [n, D], the base's logits over the head's vocabulary [n, Vs],
        tokens [n], and with `full` the base's argmax over its whole vocabulary [n]) over the
        tail rows. The base's head runs on the subset only (a sixth of the full head's work);
        `full` (held-out figures) checks whether the base's own choice is in the subset."""
        a, cfg, k = self.args, self.cfg, self.head.config.steps
        b, s = len(seqs), max(len(q) for q in seqs)
        real = torch.full((b, s), cfg.eos_token_id, dtype=torch.long)
        want = torch.zeros((b, s), dtype=torch.bool)
        for i, q in enumerate(seqs):
            real[i, :len(q)] = torch.tensor(q)
            want[i, max(1, len(q) - a.tail - k - 1):len(q)] = True
        real, want = real.to(self.device), want.to(self.device)
        with torch.no_grad():
            full_head, self.model.lm_head = self.model.lm_head, self.sub_head
            try:
                logits, _ = self.model(real, torch.arange(s, device=self.device)[None].expand(b, -1),
                                       mask=causal_mask(0, s, real.device), logits_rows=want, compact=True)
            finally:
                self.model.lm_head = full_head
            hidden = self.model.last_hidden
            best = full_head(hidden).argmax(-1) if full else None
        out, at = [], 0
        for i in range(b):
            n = int(want[i].sum())
            rows = want[i].nonzero().squeeze(-1)
            out.append((hidden[at:at + n].float(), logits[at:at + n].float(), real[i, rows],
                        None if best is None else best[at:at + n]))
            at += n
        return out

    def losses(self, seqs: list[list[int]], full: bool = False):
        """(mean soft cross-entropy, top-1 agreement per step, mean leading agreements, anchors).
        Agreement: the head's guess is the base's choice (over the subset; with `full`, over
        the base's whole vocabulary, so a choice outside the subset counts as missed)."""
        k = self.head.config.steps
        states, inputs, probs, picks = [], [], [], []
        for hidden, logits, tokens, best in self.teacher(seqs, full):
            m = tokens.numel() - k - 1  # anchors: rows with k real tokens after them
            if m <= 0:
                continue
            p = F.softmax(logits, -1)
            pick = self.head.vocab_ids[logits.argmax(-1)] if best is None else best
            states.append(hidden[:m])
            inputs.append(torch.stack([tokens[1 + j:1 + j + m] for j in range(k)], -1))  # x[r+1..r+k]
            probs.append(torch.stack([p[1 + j:1 + j + m] for j in range(k)], 1))  # base rows r+1..r+k
            picks.append(torch.stack([pick[1 + j:1 + j + m] for j in range(k)], -1))
        s, x, t, want = torch.cat(states), torch.cat(inputs), torch.cat(probs), torch.cat(picks)
        loss, agree = 0.0, []
        for j in range(k):
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
                s = self.head.step(s, x[:, j])
                logits = self.head.logits(s)
            logp = F.log_softmax(logits.float(), -1)
            loss = loss - (t[:, j] * logp).sum(-1).mean()
            agree.append(self.head.vocab_ids[logp.argmax(-1)] == want[:, j])
        hits = torch.stack(agree, -1).float()
        leading = hits.cumprod(-1).sum(-1).mean()
        return loss / k, hits.mean(0).tolist(), float(leading), s.shape[0]

    def held_out(self) -> tuple[float, list[float], float]:
        self.head.eval()
        out = []
        with torch.no_grad():
            for i in range(0, len(self.held), self.args.batch):
                loss, agree, leading, _ = self.losses(self.held[i:i + self.args.batch], full=True)
                out.append((float(loss), agree, leading))
        self.head.train()
        n = len(out)
        return (sum(o[0] for o in out) / n, [sum(o[1][j] for o in out) / n for j in range(len(out[0][1]))],
                sum(o[2] for o in out) / n)

    @staticmethod
    def held_row(held: tuple[float, list[float], float]) -> dict:
        return {"loss": held[0], **{f"agree_{j + 1}": v for j, v in enumerate(held[1])}, "accepted": held[2]}

    def save(self, held: tuple | None = None) -> None:
        cfg = self.head.config
        corpus = ", ".join(self.args.corpus) if self.args.corpus else "the standard library (corpus.py's manifest)"
        where = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        cfg.trained = {"steps": self.step, "seconds": round(self.seconds), "corpus": corpus,
                       "device": where, "batch": self.args.batch,
                       "objective": "soft cross-entropy to the frozen base's next-token distribution (on the "
                                    "head's vocabulary) at each guessed slot, real tokens folded in",
                       **({"held_out_loss": round(held[0], 4), "held_out_agreement": [round(x, 4) for x in held[1]],
                           "held_out_leading": round(held[2], 4)} if held else (cfg.trained or {}))}
        self.head.save(self.run / "head")
        torch.save({"opt": self.opt.state_dict(), "step": self.step, "seconds": self.seconds}, self.run / "state.pt")

    def train_loss(self, seqs: list[list[int]]):
        loss, agree, leading, n = self.losses(seqs)
        return loss, {**{f"agree_{j + 1}": v for j, v in enumerate(agree)}, "accepted": leading}, n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    return run(args)


def run(args) -> int:
    torch.set_num_threads(args.threads or 1)
    torch.backends.cuda.matmul.allow_tf32 = True  # the head's fp32 matmuls on a GPU
    HeadTrainer(args).train()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
