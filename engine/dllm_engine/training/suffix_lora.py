"""Teach the base to read the suffix it is shown first: a LoRA on SmolLM2 in the engine's layout.

The engine lays a hole out as `bos <suffix marker> suffix <prefix marker> prefix [fill]`
(causal, the suffix first, so the context cache is exact and reusable) and decodes the fill
left to right with the base's own next-token head. No base saw its suffix in front of the
prefix: zero-shot, the suffix moves HumanEval single-line by ~0 points (31.2% with it, 31.0%
with the prefix alone). This is the issue's first curriculum stage (blocks of 1).

One training sequence is a window of a real file cut around a hole of 1-8 lines:

    bos <suffix marker> S <prefix marker> P M S[:k]

and the loss is next-token cross-entropy on every token after the prefix marker: the prefix
(the file, with its later part already seen), the middle (the infill proper) and the first
tokens of the suffix again (the file goes on with S where the middle ends: what the engine's
choice of a fill's end reads). Dense signal on every scored row, no new token, the base's
head unchanged. Held-out cross-entropy is reported per part, so the middle's gain is seen
apart from the prefix's.

`--full-rank` learns the same projections by full fine-tuning instead (a full-rank delta each,
compressed to rank-r factors when saved: base_lora.attach_full); per CPU hour it learnt the
held-out middle nearly twice as far as a LoRA (benchmarks/RESULTS.md, forty-eighth session).

`python -m dllm_engine.training.suffix_lora --run runs/suffix --minutes 60`; `--export DIR`
writes the adapter merged into the base as a checkpoint folder for `dllm-lsp eval --model DIR`.
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F

from ..checkpoint import load, save_native
from ..layout import causal_mask
from . import base_lora
from .corpus import OPTIONS as CORPUS_OPTIONS
from .distill_run import DistillRun

FIELDS = ["split", "step", "seconds", "lr", "loss", "prefix_ce", "middle_ce", "suffix_ce", "middle_ce_bare",
          "suffix_worth", "shown_ce", "shown_ce_bare", "middle_ce_compressed", "anchor_kl", "tokens_per_s"]
SPANS = (1, 1, 1, 2, 2, 3, 4, 6, 8)
# Where each scored token sits: the prefix, the middle, the suffix's beginning again.
PREFIX, MIDDLE, SUFFIX = 0, 1, 2


def sample_fim(rng: random.Random, files: list[str], tok, cfg, suffix_max: int, prefix_max: int,
               middle_max: int, echo_max: int) -> tuple[list[int], list[int]] | None:
    """(ids, part of each id: -1 unscored, PREFIX, MIDDLE or SUFFIX) for one window of a file."""
    path = rng.choice(files)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines(keepends=True)
    if len(lines) < 8:
        return None
    at = rng.randrange(2, len(lines) - 2)
    span = rng.choice(SPANS)
    middle = "".join(lines[at:at + span])
    if not middle.strip():
        return None
    prefix = "".join(lines[max(0, at - 80):at])
    suffix = "".join(lines[at + span:at + span + 40])
    p_ids = tok.encode(prefix)[-prefix_max:]
    m_ids = tok.encode(middle)[:middle_max]
    s_all = tok.encode(suffix)
    s_ids = s_all[:rng.randrange(0, suffix_max + 1)]
    echo = s_all[:echo_max] if len(m_ids) == len(tok.encode(middle)) else []
    if len(p_ids) < 16 or len(m_ids) < 2:
        return None
    bos = [cfg.bos_token_id] if cfg.bos_token_id >= 0 else []
    head = [*bos, cfg.suffix_token_id, *s_ids, cfg.prefix_token_id]
    ids = head + p_ids + m_ids + echo
    parts = [-1] * len(head) + [PREFIX] * len(p_ids) + [MIDDLE] * len(m_ids) + [SUFFIX] * len(echo)
    return ids, parts


def shown_by_suffix(ids: list[int], parts: list[int], cfg) -> list[bool]:
    """Per position: a middle token that the context's suffix holds and its prefix does not
    (a name the middle introduces and the code after it uses): where only reading the suffix
    can tell the base what comes, the skill no base has in this layout."""
    start, end = ids.index(cfg.suffix_token_id), ids.index(cfg.prefix_token_id)
    suffix = set(ids[start + 1:end])
    prefix = {t for t, k in zip(ids, parts) if k == PREFIX}
    return [k == MIDDLE and t in suffix and t not in prefix for t, k in zip(ids, parts)]


def without_suffix(ids: list[int], parts: list[int], cfg) -> tuple[list[int], list[int]]:
    """The same sequence with the suffix taken out of its context (the markers kept)."""
    start, end = ids.index(cfg.suffix_token_id), ids.index(cfg.prefix_token_id)
    return ids[:start + 1] + ids[end:], parts[:start + 1] + parts[end:]


class SuffixTrainer(DistillRun):
    FIELDS = FIELDS
    RATE = "tokens_per_s"

    @property
    def learner(self):
        return self._params_module

    def __init__(self, args) -> None:
        self.args = args
        self.load_frozen_base()
        if base_lora.load_into(self.model, self.run / "adapter"):
            self._check_resumed_as_asked()
        elif args.full_rank:
            base_lora.attach_full(self.model, args.rank, args.targets)
        else:
            base_lora.attach(self.model, args.rank, args.alpha, args.targets)
        params = [p for n, p in self.model.named_parameters() if "lora_" in n or "delta_w" in n]
        for p in params:
            p.requires_grad_(True)
        self._params_module = torch.nn.ParameterList(params)
        self.opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
        self.resume()
        self.split_corpus()
        self.rng = random.Random(args.seed + self.step)
        self.held = self.held_out_sequences(args.held, "suffix LoRA")

    def _check_resumed_as_asked(self) -> None:
        """A run folder resumes as it was saved; flags that ask for another kind, rank or targets
        stop the run with what the folder holds, instead of training what was not asked for
        (a LoRA folder resumed with --full-rank went on as a LoRA, saved as if full-rank)."""
        a, saved = self.args, self.model.lora_config
        asked = {"full_rank": bool(a.full_rank), "rank": a.rank, "targets": sorted(a.targets)}
        held = {"full_rank": bool(saved.get("full_rank")), "rank": saved["rank"], "targets": sorted(saved["targets"])}
        differ = [k for k in asked if asked[k] != held[k]]  # targets as sets: their order on the command line is free
        if differ:
            flags = " ".join((["--full-rank"] if held["full_rank"] else []) +
                             ["--rank", str(held["rank"]), "--targets", ",".join(saved["targets"])])
            raise SystemExit(f"{self.run}: the run folder holds {'a full-rank delta' if held['full_rank'] else 'a LoRA'} "
                             f"(rank {held['rank']}, targets {','.join(saved['targets'])}), not what "
                             f"{', '.join(differ)} asks; resume it with {flags}, or start a new --run")

    def _sample(self, rng, files):
        a = self.args
        return sample_fim(rng, files, self.tok, self.cfg, a.suffix_max, a.prefix_max, a.middle_max, a.echo_max)

    def _logits(self, seqs, shown_masks=None):
        """(logits of the rows before each scored token, their targets, each target's part,
        whether the suffix shows it: `shown_masks`, per sequence, or shown_by_suffix)."""
        b, s = len(seqs), max(len(q) for q, _ in seqs)
        ids = torch.full((b, s), self.cfg.eos_token_id, dtype=torch.long)
        part = torch.full((b, s), -1, dtype=torch.long)
        shown = torch.zeros((b, s), dtype=torch.bool)
        for i, (q, p) in enumerate(seqs):
            ids[i, :len(q)] = torch.tensor(q)
            part[i, :len(p)] = torch.tensor(p)
            mask = shown_masks[i] if shown_masks is not None else shown_by_suffix(q, p, self.cfg)
            shown[i, :len(q)] = torch.tensor(mask, dtype=torch.bool)
        # Row i predicts token i + 1 (shifted logits): score the rows before each scored token.
        rows = torch.zeros((b, s), dtype=torch.bool)
        rows[:, :-1] = part[:, 1:] >= 0
        ids, part, rows, shown = ids.to(self.device), part.to(self.device), rows.to(self.device), shown.to(self.device)
        positions = torch.arange(s, device=self.device)[None].expand(b, -1)
        logits, _ = self.model(ids, positions, mask=causal_mask(0, s, ids.device), logits_rows=rows, compact=True)
        scored = rows[:, :-1]
        return logits.float(), ids[:, 1:][scored], part[:, 1:][scored], shown[:, 1:][scored]

    def losses(self, seqs, prefix_weight: float = 1.0, shown_weight: float = 1.0, shown_masks=None):
        """(CE over scored tokens, CE per part and of the tokens the suffix shows, scored
        tokens) for a batch of (ids, parts); the prefix's tokens count `prefix_weight` each in
        the first, the middle's tokens the suffix shows `shown_weight` (the others 1)."""
        logits, target, which, shown = self._logits(seqs, shown_masks)
        ce = F.cross_entropy(logits, target, reduction="none")
        per_part = []
        for sel in (which == PREFIX, which == MIDDLE, which == SUFFIX, shown):
            per_part.append(float(ce[sel].detach().mean()) if bool(sel.any()) else float("nan"))
        if prefix_weight == 1.0 and shown_weight == 1.0:
            return ce.mean(), per_part, int(target.numel())
        weight = torch.where(which == PREFIX, prefix_weight, torch.where(shown, shown_weight, 1.0))
        return (ce * weight).sum() / weight.sum().clamp_min(1e-6), per_part, int(target.numel())

    def anchor_loss(self, seqs) -> torch.Tensor:
        """KL from the frozen base to the adapted model on the same sequences with the suffix
        taken out: what the model predicts without a suffix stays the base's, so whatever the
        cross-entropy gains must come through reading the suffix, not the corpus's style."""
        bare = [without_suffix(q, p, self.cfg) for q, p in seqs]
        with torch.no_grad(), base_lora.disabled(self.model):
            teacher, _, which, _ = self._logits(bare)
        logits, _, _, _ = self._logits(bare)
        t_logp = F.log_softmax(teacher, -1)
        kl = (t_logp.exp() * (t_logp - F.log_softmax(logits, -1))).sum(-1)
        if self.args.anchor_rows == "infill":
            # Only the middle's and the suffix's rows: over all rows the prefix's hundreds hide
            # them (measured at weight 1: the mean KL stayed ~0.01 while the middle's suffix-less
            # CE fell 0.27 nats).
            kl = kl[which != PREFIX]
        return kl.mean() if kl.numel() else kl.sum()

    def train_loss(self, seqs):
        loss, parts, n = self.losses(seqs, self.args.prefix_weight, self.args.shown_weight)
        metrics = dict(zip(("prefix_ce", "middle_ce", "suffix_ce", "shown_ce"), parts))
        if self.args.anchor:
            kl = self.anchor_loss(seqs)
            loss = loss + self.args.anchor * kl
            metrics["anchor_kl"] = float(kl.detach())
        return loss, metrics, n

    def held_out(self):
        """Held-out CE: overall, per part, and the middle's once more with the suffix taken out
        of the context. Their difference is what the suffix is worth to the middle: a run that
        only adapts the base to the corpus's style lowers both, one that teaches it to read the
        suffix widens the gap (measured: the base 0.12 nats, the first CPU run's adapter 0.14,
        while the middle's CE fell 1.80 -> 1.34). The same for the middle's tokens the suffix
        shows (shown_by_suffix), with and without it: where reading the suffix pays most."""
        self.model.eval()
        masks = [shown_by_suffix(q, p, self.cfg) for q, p in self.held]
        with torch.no_grad():
            with_suffix = self._part_means(self.held, masks)
            cut = [(without_suffix(q, p, self.cfg), without_suffix(q, m, self.cfg)[1]) for (q, p), m in zip(self.held, masks)]
            bare = self._part_means([c[0] for c in cut], [c[1] for c in cut])
            compressed = float("nan")
            if self.model.lora_config.get("full_rank"):
                # A full-rank run ships its delta's rank-r approximation: the middle's CE of that.
                with base_lora.compressed(self.model):
                    compressed = self._part_means(self.held, masks)[2]
        self.model.train()
        return [*with_suffix[:4], bare[2], bare[2] - with_suffix[2], with_suffix[4], bare[4], compressed]

    def _part_means(self, seqs, masks) -> list[float]:
        """Mean CE over every scored token, the prefix's, the middle's, the suffix's again and
        the middle's tokens `masks` marks."""
        sums, counts = [0.0] * 5, [0] * 5
        for (q, p), mask in zip(seqs, masks):
            loss, parts, n = self.losses([(q, p)], shown_masks=[mask])
            sums[0] += float(loss) * n
            counts[0] += n
            sizes = [sum(1 for x in p[1:] if x == k) for k in (PREFIX, MIDDLE, SUFFIX)] + [sum(mask[1:])]
            for k, (v, m) in enumerate(zip(parts, sizes)):
                if v == v:  # not NaN
                    sums[k + 1] += v * m
                    counts[k + 1] += m
        return [s / max(1, c) for s, c in zip(sums, counts)]

    @staticmethod
    def held_row(held) -> dict:
        row = dict(zip(("loss", "prefix_ce", "middle_ce", "suffix_ce", "middle_ce_bare", "suffix_worth", "shown_ce",
                        "shown_ce_bare", "middle_ce_compressed"), held))
        return {k: v for k, v in row.items() if v == v}  # a LoRA run has no compressed figure (NaN)

    def save(self, held=None) -> None:
        corpus = (", ".join(self.args.corpus) if self.args.corpus else
                  "the standard library" + (" and the permissive installed packages" if self.args.with_packages else "")
                  + " (corpus.py's manifest)")
        trained = {"steps": self.step, "seconds": round(self.seconds), "corpus": corpus, "batch": self.args.batch,
                   "objective": "next-token cross-entropy after the prefix marker (prefix, middle, the suffix again)",
                   "prefix_weight": self.args.prefix_weight, "shown_weight": self.args.shown_weight,
                   "anchor": self.args.anchor,
                   "anchor_rows": self.args.anchor_rows,
                   "with_packages": bool(getattr(self.args, "with_packages", False)),
                   "lr": self.args.lr,
                   **({"learnt": "a full-rank delta per projection, compressed by SVD"} if self.args.full_rank else {}),
                   **({"held_out": self.held_row(held)} if held else {})}
        base_lora.save(self.model, self.run / "adapter", trained)
        torch.save({"opt": self.opt.state_dict(), "step": self.step, "seconds": self.seconds}, self.run / "state.pt")


def export(model_name: str, adapter: Path, out: Path) -> None:
    """The base with the adapter merged, as a checkpoint folder (config and tokenizer copied),
    in float32: merged into bf16 weights, most of a CPU-trained adapter's change rounds away. A
    full-rank run merges its saved factors, not its delta: the export computes what ships."""
    loaded = load(model_name, dtype=torch.float32)
    if not base_lora.load_into(loaded.model, adapter, resume=False):
        raise SystemExit(f"{adapter}: no {base_lora.CONFIG_FILE}")
    base_lora.merge(loaded.model)
    save_native(loaded.model, out, dtype=torch.float32)
    shutil.copy(loaded.path / "tokenizer.json", out / "tokenizer.json")


def ship(run: Path, dest: Path) -> None:
    """The run's adapter for the package: its factors in bf16 (half the bytes; the engine
    casts them to the model's dtype anyway), its lora.json and the run's loss curve."""
    from safetensors.torch import load_file, save_file

    src = run / "adapter"
    if not (src / base_lora.CONFIG_FILE).exists():
        raise SystemExit(f"{src}: no {base_lora.CONFIG_FILE}")
    dest.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in load_file(str(src / base_lora.WEIGHTS_FILE)).items()}
    save_file(tensors, str(dest / base_lora.WEIGHTS_FILE))
    shutil.copy(src / base_lora.CONFIG_FILE, dest / base_lora.CONFIG_FILE)
    if (run / "loss.csv").exists():
        shutil.copy(run / "loss.csv", dest / "loss.csv")


def target_list(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in base_lora.TARGETS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose among {', '.join(base_lora.TARGETS)}")
    return names


def add_arguments(p) -> None:
    p.add_argument("--model", default="default", help="the base (a name in bases/catalog.py, or 'default')")
    p.add_argument("--run", required=True, help="run folder (resumed when it holds a state)")
    for flag, kw in CORPUS_OPTIONS:
        p.add_argument(flag, **kw)
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--decay-minutes", type=float, default=90.0)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0)
    p.add_argument("--targets", type=target_list, default=base_lora.TARGETS, metavar="NAMES",
                   help="comma list of the projections adapted (default every one); each adds two thin "
                        "products a pass at inference (low_rank.py), so attention only "
                        "(q_proj,k_proj,v_proj,o_proj) has half the products")
    p.add_argument("--full-rank", action="store_true",
                   help="learn a full-rank delta beside each target projection (full fine-tuning of them) instead "
                        "of a LoRA, saved compressed to --rank by a truncated SVD (the same adapter folder); the "
                        "shipped adapter's way, at --lr 1e-4 (3e-5 learnt no faster than the LoRA)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--suffix-max", type=int, default=256)
    p.add_argument("--prefix-max", type=int, default=384)
    p.add_argument("--middle-max", type=int, default=96)
    p.add_argument("--echo-max", type=int, default=24, help="the suffix's first tokens again after the middle")
    p.add_argument("--prefix-weight", type=float, default=1.0,
                   help="weight of each prefix token's CE against the middle's and the suffix's (1: plain next-token "
                        "training after the marker; 0: the infill only, so the corpus's style is learnt where it "
                        "fills a hole, not from the prefix's hundreds of tokens)")
    p.add_argument("--shown-weight", type=float, default=1.0,
                   help="weight of each middle token the suffix holds and the prefix does not (a name the middle "
                        "introduces and the code after it uses: only reading the suffix tells the base it comes)")
    p.add_argument("--anchor", type=float, default=0.0,
                   help="weight of the KL to the frozen base on the sequences without their suffix (0: none)")
    p.add_argument("--anchor-rows", choices=("all", "infill"), default="all",
                   help="the rows the anchor's KL is averaged over: every scored row, or the middle's and the "
                        "suffix's only (where a style learnt instead of the suffix would show)")
    p.add_argument("--held", type=int, default=32)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--eval-every", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto (the same recipe on one GPU takes a larger --batch)")
    p.add_argument("--export", metavar="DIR", help="only write the run's adapter merged into the base to DIR")
    p.add_argument("--ship", metavar="DIR", help="only copy the run's adapter (bf16) and loss curve to DIR")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.ship:
        ship(Path(args.run), Path(args.ship))
        return 0
    if args.export:
        export(args.model, Path(args.run) / "adapter", Path(args.export))
        return 0
    SuffixTrainer(args).train()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
