"""A draft head: a small network beside the base that guesses the next few tokens from the
base's own last hidden state, checked by the next pass like any draft (drafting.py).

Why beside the base and not inside it: a pass of the base on a CPU costs ~600 small ops
whatever its rows, and anything added to every layer (the draft rows' adapter,
draft_adapter.py) makes each pass dearer by more than it saves. This head runs after the
pass, on one row per hole: the row whose logits gave the newest committed token.

What it computes (a recurrent drafter, after EAGLE and ReDrafter): the state starts at
the base's final normed hidden state h at that row (which chose token x); each step
folds the embedding of the token just chosen into the state,
    s <- s + MLP([norm(s); norm(embed(x))])   (one or more residual blocks)
and reads the next token from the state through the base's own tied embedding, cut
to the tokens code uses most (`vocab`, recorded in the head's file: a GEMV over 8 k
rows instead of 49 k). So step 1 guesses the token after x, step 2 the one after that
given step 1's guess, and so on.

It never changes what is committed: the base checks every guessed token (greedy output
is unchanged, as with text lookup); a poor head costs a little time per pass, never
quality. The one exception, on by default: a single line ends on the head's word where it
is sure the next token is a line break (head_end.py, EngineConfig.head_end_prob). It is
distilled from the frozen base (training/draft_head.py).

Files: `draft_head.safetensors` (weights, the vocabulary subset's ids) and
`draft_head.json` (sizes, the base it belongs to, what it was trained on).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

WEIGHTS_FILE = "draft_head.safetensors"
CONFIG_FILE = "draft_head.json"


class HeadGuesses(NamedTuple):
    """DraftHead.guess_chains' answer."""
    chains: torch.Tensor  # long [N, width, steps]: the chains, best first token first
    first_prob: torch.Tensor  # float [N, width]: the head's probability of each chain's first token
    end_prob: torch.Tensor | None = None  # float [N]: of the first token being one of its row's `ends`
    end_token: torch.Tensor | None = None  # long [N]: the likeliest of them (the base's vocabulary)


@dataclass
class DraftHeadConfig:
    hidden_size: int
    inner: int = 1536  # each block's MLP width
    blocks: int = 2  # residual blocks per step
    steps: int = 4  # tokens it was trained to guess in a row
    vocab: int = 8192  # the subset of the base's vocabulary it can guess
    eps: float = 1e-5
    base: str = ""  # the base's name (bases/catalog.py) and cache key: a head fits one base
    base_key: str = ""
    trained: dict | None = None

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> "DraftHeadConfig":
        return cls(**json.loads(Path(path).read_text()))


class StepBlock(nn.Module):
    """s + down(silu(gate(u)) * up(u)), u = [norm(s); norm(e)]; `down` starts at zero."""

    def __init__(self, dim: int, inner: int, eps: float) -> None:
        super().__init__()
        self.norm_s = nn.RMSNorm(dim, eps=eps)
        self.norm_e = nn.RMSNorm(dim, eps=eps)
        self.gate_up = nn.Linear(2 * dim, 2 * inner, bias=False)
        self.down = nn.Linear(inner, dim, bias=False)
        nn.init.normal_(self.gate_up.weight, std=(2 * dim) ** -0.5)
        nn.init.zeros_(self.down.weight)

    def forward(self, s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(torch.cat((self.norm_s(s), self.norm_e(e)), -1)).chunk(2, -1)
        return s + self.down(F.silu(gate) * up)


class DraftHead(nn.Module):
    def __init__(self, cfg: DraftHeadConfig, embed: torch.Tensor, vocab_ids: torch.Tensor) -> None:
        """`embed`: the base's embedding [V, D] (its tied head); `vocab_ids`: long [vocab], the
        tokens the head can guess. Both are frozen buffers (the head's rows are copied out
        of the embedding: 9 MB in bf16, read every step)."""
        super().__init__()
        self.config = cfg
        self.blocks = nn.ModuleList(StepBlock(cfg.hidden_size, cfg.inner, cfg.eps) for _ in range(cfg.blocks))
        self.out_norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.eps)
        self.register_buffer("vocab_ids", vocab_ids.long().clone())
        self.register_buffer("head", embed.detach()[vocab_ids].clone(), persistent=False)
        self.embed = embed.detach()  # the base's own tensor, not a buffer: no copy, not saved
        self.readout: nn.Module | None = None  # the vocabulary rows as a weight-only kernel (weight_only())

    def step(self, s: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The state after folding in `tokens` (long [N], the base's vocabulary)."""
        e = self.embed[tokens].to(s.dtype)
        for block in self.blocks:
            s = block(s, e)
        return s

    def logits(self, s: torch.Tensor) -> torch.Tensor:
        """[N, vocab] over the subset (index into `vocab_ids` for the base's token ids)."""
        if self.readout is not None:
            return self.readout(self.out_norm(s))
        return F.linear(self.out_norm(s), self.head.to(s.dtype))

    def weight_only(self) -> None:
        """Its projections and vocabulary rows as int8 weight-only kernels (Int8RowLinear), for
        an engine whose base runs such kernels (a CPU). Why: a step of the head reads ~28 MB
        of fp32 weights, and torch's fp32 GEMV over the 8,192 vocabulary rows took 0.68 ms for
        one row and 1.19 ms for two (a draft tree's chains) on an AMD EPYC, int8 0.16 / 0.19 ms:
        with three steps a pass, the head had cost ~5 ms of a ~30 ms pass. Its guesses may
        differ in a last digit; what is committed never does (the base checks every guess)."""
        from .weight_only import Int8RowLinear

        for block in self.blocks:
            block.gate_up = Int8RowLinear(block.gate_up.weight)
            block.down = Int8RowLinear(block.down.weight)
        self.readout = Int8RowLinear(self.head)

    def guess(self, hidden: torch.Tensor, tokens: torch.Tensor, steps: int) -> torch.Tensor:
        """long [N, steps]: the greedy guesses after `tokens` (long [N]) for rows whose base
        hidden state is `hidden` [N, D] (the row that chose each token)."""
        return self.guess_top(hidden, tokens, steps, 1)[:, 0]

    @torch.inference_mode()
    def guess_top(self, hidden: torch.Tensor, tokens: torch.Tensor, steps: int, width: int,
                  first_allowed: torch.Tensor | None = None,
                  start_ban: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """long [N, width, steps]: `width` chains per row, its `width` likeliest first tokens
        (best first), each followed by greedy guesses (the draft tree's head chains:
        draft_tree.py; the first token is where the head is most often wrong)."""
        return self.guess_chains(hidden, tokens, steps, width, first_allowed, start_ban).chains

    @torch.inference_mode()
    def guess_chains(self, hidden: torch.Tensor, tokens: torch.Tensor, steps: int, width: int,
                     first_allowed: torch.Tensor | None = None,
                     start_ban: tuple[torch.Tensor, torch.Tensor] | None = None,
                     ends: torch.Tensor | None = None) -> HeadGuesses:
        """guess_top's chains and the head's probability of each chain's first token, over its
        vocabulary (how far a pass may trust the chain: drafting.chains_for).
        `ends` (bool [N, V] over the base's vocabulary, or None): per row, the tokens that would
        end its fill there; the answer then also holds the head's probability of the first
        token being one of them, and the likeliest of them (head_end.py).
        `first_allowed` (bool [N, V] over the base's vocabulary, or None): the tokens each
        row's first guess may be, where the base's own choice there is restricted (a healed
        prefix: engine.Engine._restrict_first_slot); the probabilities are then among those.
        A row none of whose allowed tokens the head can guess is left unrestricted (its guess
        is then checked and refused as before).
        `start_ban` ((banned bool [N, V], blank bool [V]), or None): Hole.banned_starts as the
        base obeys it (start_ban.py): while a chain's guesses are all blank, its next guess may
        not be a banned token of its row (an empty body's first code token after its line
        break: the base may not write a docstring there, so a chain guessing one is refused
        at it; the head's best allowed token may be the base's choice)."""
        n, dtype = tokens.shape[0], self.head.dtype
        if steps <= 0:
            return HeadGuesses(tokens.new_empty(n, width, 0), torch.zeros(n, width))
        s = self.step(hidden.to(dtype), tokens)
        width = min(width, self.vocab_ids.numel())
        first = self.logits(s).float()
        end_prob = end_token = None
        ok = None if first_allowed is None else first_allowed.to(first.device)[:, self.vocab_ids]
        if start_ban is not None:
            banned = start_ban[0].to(first.device)[:, self.vocab_ids]
            ok = ~banned if ok is None else ok & ~banned
        if ok is not None:
            ok |= ~ok.any(-1, keepdim=True)
            first = first.masked_fill(~ok, float("-inf"))
        probs = first.softmax(-1)
        if ends is not None:
            ending = ends.to(first.device)[:, self.vocab_ids]
            end_prob = (probs * ending).sum(-1)
            end_token = self.vocab_ids[probs.masked_fill(~ending, -1.0).argmax(-1)]
        top = probs.topk(width, -1)
        x = self.vocab_ids[top.indices].reshape(-1)  # [N * width]
        s = s.repeat_interleave(width, 0)
        if start_ban is not None:  # per chain: its row's ban, live while its guesses are blank
            banned = banned.repeat_interleave(width, 0)
            blank = start_ban[1].to(x.device)
            live = blank[x] & banned.any(-1)
        out = [x]
        for _ in range(steps - 1):
            s = self.step(s, x)
            logits = self.logits(s)
            if start_ban is not None and bool(live.any()):
                logits = logits.masked_fill(banned & live[:, None], float("-inf"))
            x = self.vocab_ids[logits.argmax(-1)]
            if start_ban is not None:
                live &= blank[x]
            out.append(x)
        return HeadGuesses(torch.stack(out, -1).view(n, width, steps), top.values, end_prob, end_token)

    def save(self, folder: Path) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: (v.detach().to(torch.bfloat16) if v.is_floating_point() else v.detach()).contiguous()
                 for k, v in self.state_dict().items()}
        save_file(state, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
        self.config.save(folder / CONFIG_FILE)


def code_vocabulary(counts: torch.Tensor, size: int, always: list[int] = ()) -> torch.Tensor:
    """long [size]: the `size` most frequent token ids of `counts` (long [V], occurrences in a
    corpus), `always` first (tokens the head must be able to guess whatever their count)."""
    counts = counts.clone().float()
    always = [i for i in dict.fromkeys(always) if 0 <= i < counts.numel()]
    counts[always] = float("inf")
    return counts.topk(min(size, counts.numel())).indices.sort().values


def load(folder: Path, embed: torch.Tensor, dtype: torch.dtype = torch.float32) -> DraftHead | None:
    """The head stored in `folder` on the base embedding `embed`, or None when there is none."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / CONFIG_FILE).exists():
        return None
    cfg = DraftHeadConfig.load(folder / CONFIG_FILE)
    state = load_file(str(folder / WEIGHTS_FILE))
    head = DraftHead(cfg, embed, state["vocab_ids"])
    head.load_state_dict(state, strict=True)
    return head.to(dtype=dtype).eval()


def shipped_dir(base: str) -> Path:
    """Where the package keeps the draft head of base `base` (bases/catalog.py)."""
    return Path(__file__).parent / "bases" / "heads" / base


def attach(loaded, where: str = "shipped") -> DraftHead | None:
    """The draft head for `loaded` (a checkpoint.LoadedModel): `where` "shipped" (the package's
    head for the model's base, when it has one), "none", or a folder. None when there is
    none, or the model is not a shifted-logit model decoded in blocks of 1."""
    cfg = loaded.config
    if where == "none" or not cfg.logits_shift or int(cfg.decode_block) != 1:
        return None
    if where == "shipped" and not cfg.extra.get("base"):
        return None
    folder = shipped_dir(cfg.extra["base"]) if where == "shipped" else Path(where)
    param = next(loaded.model.parameters())
    # fp32 whatever the base (bf16 GEMVs of one or two rows were slower than fp32 on some CPUs);
    # an engine whose base runs weight-only kernels makes it int8 too (DraftHead.weight_only)
    head = load(folder, loaded.model.model.embed_tokens.weight, dtype=torch.float32)
    if head is None:
        if where != "shipped":
            from .model_config import CheckpointError

            raise CheckpointError(f"{folder}: no {CONFIG_FILE} (a draft head folder holds it and {WEIGHTS_FILE})")
        return None
    if head.config.hidden_size != cfg.hidden_size or int(head.vocab_ids.max()) >= cfg.vocab_size:
        from .model_config import CheckpointError

        raise CheckpointError(f"{folder}: a draft head for {head.config.base or 'another model'} "
                              f"(hidden {head.config.hidden_size}) does not fit {loaded.name}")
    return head.to(param.device)
