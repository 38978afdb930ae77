"""Draft rows: masked canvas slots that guess the tokens after the current one.

A shifted-logit base decoded in blocks of 1 commits one token per pass, and the
pass's cost hardly depends on how many rows it runs (on a CPU, reading the weights
dominates). Masked slots after the current one are such rows: each reads the
context and the rows before it and predicts a slot further ahead, as a diffusion
model predicts every masked slot at once. The untrained base cannot do that (a
mask token means nothing to it), so a small adapter learns it: a mask embedding
and, per layer, two low-rank bottlenecks (one into the attention's input, one
beside the MLP) that act on the draft rows alone.

Only the draft rows are adapted. Every other row, and therefore every committed
token, is computed by the base exactly as without the adapter (the draft rows come
after them and causal rows never see later ones), so greedy output is unchanged:
the draft rows' guesses are checked by the next pass like any draft (drafting.py).
That is why this adapter can be trained on a CPU in hours without putting what the
base knows at risk: it is distilled from the frozen base (its next-token
distribution at the slot each draft row predicts), and a poor adapter costs
passes, never quality.

Files: `draft_adapter.safetensors` (the weights) and `draft_adapter.json` (rank,
rows trained for, the base it belongs to and what it was trained on).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

WEIGHTS_FILE = "draft_adapter.safetensors"
CONFIG_FILE = "draft_adapter.json"

# Where each row's adapter acts: (batch index, row index) of the adapted rows.
Rows = tuple[torch.Tensor, torch.Tensor]


@dataclass
class DraftAdapterConfig:
    hidden_size: int
    num_layers: int
    rank: int = 64
    rows: int = 4  # draft rows per pass it was trained for (the slots 2 .. rows + 1 ahead)
    base: str = ""  # the base's name (bases/catalog.py) and its cache key: an adapter fits one base
    base_key: str = ""
    trained: dict | None = None  # steps, tokens, seconds, corpus, held-out agreement per row

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> "DraftAdapterConfig":
        return cls(**json.loads(Path(path).read_text()))


class Bottleneck(nn.Module):
    """x -> up(silu(down(x))), zero at initialisation (up starts at zero), so an untrained
    adapter leaves the base exactly as it is."""

    def __init__(self, dim: int, rank: int) -> None:
        super().__init__()
        self.down = nn.Linear(dim, rank, bias=False)
        self.up = nn.Linear(rank, dim, bias=False)
        nn.init.normal_(self.down.weight, std=dim ** -0.5)
        nn.init.zeros_(self.up.weight)

    def add_to(self, out: torch.Tensor, x: torch.Tensor, rows: Rows) -> torch.Tensor:
        """`out` with this bottleneck of `x` added at `rows` (a new tensor: autograd-safe)."""
        picked = x[rows].to(self.down.weight.dtype)
        delta = self.up(F.silu(self.down(picked))).to(out.dtype)
        return out.index_put(rows, delta, accumulate=True)


class LayerAdapter(nn.Module):
    def __init__(self, dim: int, rank: int) -> None:
        super().__init__()
        self.attn_in = Bottleneck(dim, rank)  # changes what the draft rows ask of the context
        self.mlp = Bottleneck(dim, rank)  # beside the MLP, on the same normed input

    def attention_input(self, h: torch.Tensor, rows: Rows) -> torch.Tensor:
        return self.attn_in.add_to(h, h, rows)

    def mlp_output(self, out: torch.Tensor, h: torch.Tensor, rows: Rows) -> torch.Tensor:
        return self.mlp.add_to(out, h, rows)


class DraftAdapter(nn.Module):
    def __init__(self, cfg: DraftAdapterConfig) -> None:
        super().__init__()
        self.config = cfg
        self.mask_embed = nn.Parameter(torch.zeros(cfg.hidden_size))
        self.layers = nn.ModuleList(LayerAdapter(cfg.hidden_size, cfg.rank) for _ in range(cfg.num_layers))

    def embed(self, x: torch.Tensor, rows: Rows) -> torch.Tensor:
        """The draft rows' input: the learned mask embedding in place of the token's."""
        n = rows[0].numel()
        return x.index_put(rows, self.mask_embed.to(x.dtype).expand(n, -1))

    def save(self, folder: Path) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
        self.config.save(folder / CONFIG_FILE)


def init_from_base(model, mask_id: int, rank: int = 64, rows: int = 4) -> DraftAdapter:
    """A fresh adapter for `model` (a DiffusionTransformer): the mask embedding starts at the
    base's own embedding of the mask token (scaled as the model scales embeddings)."""
    cfg = model.config
    adapter = DraftAdapter(DraftAdapterConfig(cfg.hidden_size, cfg.num_layers, rank=rank, rows=rows))
    with torch.no_grad():
        adapter.mask_embed.copy_(model.model.embed_tokens.weight[mask_id].float() * cfg.embed_scale)
    return adapter


def load(folder: Path, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> DraftAdapter | None:
    """The adapter stored in `folder`, or None when there is none."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / CONFIG_FILE).exists():
        return None
    adapter = DraftAdapter(DraftAdapterConfig.load(folder / CONFIG_FILE))
    adapter.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    return adapter.to(device=device, dtype=dtype).eval()


def shipped_dir(base: str) -> Path:
    """Where the package keeps the draft adapter of base `base` (bases/catalog.py)."""
    return Path(__file__).parent / "bases" / "adapters" / base


def attach(loaded, where: str = "shipped") -> DraftAdapter | None:
    """Attach a draft adapter to `loaded.model` (a checkpoint.LoadedModel) and return it:
    `where` "shipped" (the package's adapter for the model's base, when it has one),
    "none", or a folder. None when there is none, or the model is not a shifted-logit
    model decoded in blocks of 1 (the only decoding that runs draft rows)."""
    cfg = loaded.config
    if where == "none" or not cfg.logits_shift or int(cfg.decode_block) != 1:
        return None
    folder = shipped_dir(cfg.extra.get("base", "")) if where == "shipped" else Path(where)
    if where == "shipped" and not cfg.extra.get("base"):
        return None
    param = next(loaded.model.parameters())
    adapter = load(folder, dtype=param.dtype, device=param.device)
    if adapter is None:
        if where != "shipped":
            from .model_config import CheckpointError

            raise CheckpointError(f"{folder}: no {CONFIG_FILE} (a draft adapter folder holds it and {WEIGHTS_FILE})")
        return None
    if (adapter.config.hidden_size, adapter.config.num_layers) != (cfg.hidden_size, cfg.num_layers):
        from .model_config import CheckpointError

        raise CheckpointError(f"{folder}: a draft adapter for {adapter.config.base or 'another model'} "
                              f"(hidden {adapter.config.hidden_size}, {adapter.config.num_layers} layers) "
                              f"does not fit {loaded.name}")
    loaded.model.draft_adapter = adapter
    return adapter
