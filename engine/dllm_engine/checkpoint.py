"""Load a checkpoint folder: `config.json` + safetensors (single or sharded), memory-mapped.

Never unpickles anything. The native format is our own config (under the
`dllm_lsp_config` key) with Qwen2-style tensor names; other families are
detected from `architectures`/`model_type` by `dllm_engine.families` and
mapped onto the same `ModelConfig` and names.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from safetensors.torch import save_file

from .model import DiffusionTransformer, rope_inv_freq
from .model_config import CheckpointError, ModelConfig
from .placement import fused_groups, place_weights
from .room import check_disk, check_memory
from .shards import ShardReader, check_float, read_header
from .tokenizer import TextTokenizer

# The small from-scratch model shipped in the package (fast; selectable as "small").
SMALL_MODEL_DIR = Path(__file__).parent / "default_model"
# The model used when none is named: the environment's choice, else the default.
MODEL_ENV = "DLLM_LSP_MODEL"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


@dataclass
class LoadedModel:
    model: DiffusionTransformer
    config: ModelConfig
    tokenizer: TextTokenizer | None
    path: Path
    name: str


def resolve_model_path(model: str | None) -> Path:
    """A checkpoint folder for `model`: None (the environment's DLLM_LSP_MODEL, else
    "default"), "default" (a pretrained base adapted to our layout, cached on first use),
    "small" (the from-scratch model in the package), a base's name, a folder, or a hub id."""
    name = model or os.environ.get(MODEL_ENV) or "default"
    if name == "small":
        return SMALL_MODEL_DIR
    from .bases import BASES, DEFAULT_BASE, model_dir

    if name == "default":
        return model_dir(DEFAULT_BASE)
    if name in BASES:
        return model_dir(name)
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    from .families.hub import resolve_hub_id  # huggingface_hub local cache lookup

    return resolve_hub_id(name)


def display_name(model: str | None, path: Path) -> str:
    """The name a user recognises: "default", "small", a base's name, or the folder's name."""
    name = model or os.environ.get(MODEL_ENV) or "default"
    if path == SMALL_MODEL_DIR:
        return "small"
    return name if "/" not in name and not Path(name).expanduser().is_dir() else path.name


def read_config(path: Path, logits_only: bool = False) -> tuple[ModelConfig, dict]:
    cfg_file = path / "config.json"
    try:
        raw = json.loads(cfg_file.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{cfg_file}: missing (a checkpoint folder needs config.json)") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{cfg_file}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{cfg_file}: must hold a JSON object, not {type(raw).__name__}")
    if "dllm_lsp_config" in raw:
        if not isinstance(raw["dllm_lsp_config"], dict):
            raise CheckpointError(f"{cfg_file}: dllm_lsp_config must be an object")
        try:
            return ModelConfig.from_dict(raw["dllm_lsp_config"]), raw
        except TypeError as exc:
            raise CheckpointError(f"{cfg_file}: bad dllm_lsp_config: {exc}") from None
        except CheckpointError as exc:
            raise CheckpointError(f"{cfg_file}: {exc}") from None
    from .families import config_from_hf  # third-party families

    return config_from_hf(raw, path, logits_only=logits_only), raw


def weight_files(path: Path) -> dict[str, Path]:
    """Tensor name -> file holding it."""
    index = path / INDEX_FILE
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise CheckpointError(f"{index}: bad shard index: {exc}") from None
        files = {name: path / shard for name, shard in weight_map.items()}
        for shard in set(files.values()):
            if not shard.exists():
                raise CheckpointError(f"{index}: names shard {shard.name}, which is missing")
        return files
    single = path / SINGLE_FILE
    if not single.exists():
        raise CheckpointError(f"{path}: no {SINGLE_FILE} or {INDEX_FILE}")
    return {name: single for name in read_header(single)}


def load_state(path: Path, rename=None, *, lazy: bool = False) -> tuple[dict, dict[str, Path]]:
    """Our tensor name -> tensor (memory-mapped), or with `lazy` -> TensorRef (where its bytes
    are, nothing read yet: `build_model` reads each once, into its final buffer). Every shard's
    header is checked first (truncated file, tensor missing from the shard the index names,
    a dtype the engine cannot load), so a broken checkpoint fails before any long work."""
    files = weight_files(path)
    headers = {file: read_header(file) for file in dict.fromkeys(files.values())}
    state, origin = {}, {}
    for name, file in files.items():
        ours = rename(name) if rename else name
        if ours is None:
            continue
        ref = headers[file].get(name)
        if ref is None:  # the shard index points at a shard without it
            raise CheckpointError(f"{file}: has no tensor {name!r} (the shard index says it does)")
        check_float(ref)
        state[ours], origin[ours] = ref, file
    if not lazy:
        reader = ShardReader()
        state = {name: reader.mmap(ref) for name, ref in state.items()}
    return state, origin


@contextlib.contextmanager
def _no_weight_init():
    """Skip nn.Linear / nn.Embedding's random init while building a model whose weights are
    about to be loaded. On meta tensors the init does no work, but its first call imports
    torch._dynamo (about 1.3 s of every cold start); transformers' `no_init_weights` does the same."""
    names = ("normal_", "uniform_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
             "xavier_normal_", "trunc_normal_", "zeros_", "ones_", "constant_")
    saved = {n: getattr(nn.init, n) for n in names}

    def skip(tensor, *args, **kwargs):
        return tensor

    try:
        for n in names:
            setattr(nn.init, n, skip)
        yield
    finally:
        for n, fn in saved.items():
            setattr(nn.init, n, fn)


def build_model(cfg: ModelConfig, state: dict[str, torch.Tensor], origin: dict[str, Path],
                device: torch.device, dtype: torch.dtype, where: Path | None = None,
                their_name=None) -> DiffusionTransformer:
    """`where`: the file that should list every tensor (index or single file); `their_name`:
    our tensor name -> the checkpoint's, so errors speak the checkpoint's language.

    `state` holds tensors or TensorRefs (`load_state(lazy=True)`). Each weight is written
    once, where it will live: q/k/v and gate/up straight into one buffer per layer (what
    `fuse_projections` then uses without a copy), the rest memory-mapped when the dtype
    matches on the CPU, else read and converted piece by piece onto `device`."""
    device = torch.device(device)
    with torch.device("meta"), _no_weight_init():
        model = DiffusionTransformer(cfg)
    expected = model.state_dict()
    if cfg.tie_word_embeddings:
        expected.pop("lm_head.weight", None)
        state.pop("lm_head.weight", None)
    missing = [n for n in expected if n not in state]
    if missing:
        theirs = their_name(missing[0]) if their_name else missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(f"{where or 'checkpoint'}: missing tensor {theirs!r}{more}")
    unexpected = [n for n in state if n not in expected]
    if unexpected:
        raise CheckpointError(f"{origin[unexpected[0]]}: unexpected tensor {unexpected[0]!r}")
    for name, want in expected.items():
        got = state[name]
        if tuple(got.shape) != tuple(want.shape):
            name_t = their_name(name) if their_name else name
            raise CheckpointError(f"{origin[name]}: tensor {name_t!r} has shape {tuple(got.shape)}, config expects {tuple(want.shape)}")
        if not got.is_floating_point():
            raise CheckpointError(f"{origin[name]}: tensor {name!r} has dtype {got.dtype}, expected floating point")
    check_memory(sum(w.numel() for w in expected.values()) * dtype.itemsize, device, dtype, where or Path("checkpoint"))
    place_weights(state, fused_groups(cfg), device, dtype, ShardReader())
    model.load_state_dict(state, strict=False, assign=True)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.inv_freq = rope_inv_freq(cfg).to(device)
    if any(model.local):
        model.inv_freq_local = rope_inv_freq(cfg, cfg.rope_local_theta).to(device)
    return model.eval()


def load(model: str | None, device: str | torch.device = "cpu", dtype: torch.dtype | None = None,
         logits_only: bool = False) -> LoadedModel:
    """`logits_only`: special ids the checkpoint does not name (no tokenizer files) are left
    unresolved (listed in `config.extra["unresolved_special_ids"]`); fine for raw logits, not for infill."""
    path = resolve_model_path(model)
    device = torch.device(device)
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    cfg, raw = read_config(path, logits_only)
    rename = their_name = own_loader = None
    if "dllm_lsp_config" not in raw:
        from .families import loader_for, renamer_for, their_name_for

        rename, their_name, own_loader = renamer_for(raw, cfg), their_name_for(cfg), loader_for(cfg)
    if own_loader is not None:  # a family that runs through another implementation (DiffusionGemma)
        net = own_loader(path, cfg, device, dtype)
    else:
        state, origin = load_state(path, rename, lazy=True)
        where = path / INDEX_FILE if (path / INDEX_FILE).exists() else path / SINGLE_FILE
        net = build_model(cfg, state, origin, device, dtype, where, their_name)
    tok_file = path / "tokenizer.json"
    tokenizer = TextTokenizer(tok_file) if tok_file.exists() else None
    name = display_name(model, path)
    return LoadedModel(model=net, config=cfg, tokenizer=tokenizer, path=path, name=name)


def save_native(model: DiffusionTransformer, out: Path, dtype: torch.dtype = torch.bfloat16) -> None:
    """Write config.json + model.safetensors (tied head stored once)."""
    out.mkdir(parents=True, exist_ok=True)
    check_disk(sum(p.numel() for p in model.state_dict().values()) * dtype.itemsize, out)
    model.config.save(out / "config.json")
    state = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(out / SINGLE_FILE), metadata={"format": "pt"})
