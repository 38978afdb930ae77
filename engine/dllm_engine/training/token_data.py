"""The corpus as one compact token file: every manifest file tokenized once.

`tokens.bin` holds all files' token ids back to back as little-endian uint16
(the vocabulary is 8k, well under 65,536); `offsets.npy` holds int64 start
offsets, one per file plus the end, so file i is tokens[offsets[i]:offsets[i+1]].
`meta.json` names the tokenizer, the manifest split and the file list, so a
token file is self-describing and can be carried to another machine (the GPU
recipe trains from it without the corpus or the tokenizer).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..tokenizer import TextTokenizer

TOKENS_FILE = "tokens.bin"
OFFSETS_FILE = "offsets.npy"
META_FILE = "meta.json"
MIN_FILE_TOKENS = 16  # shorter files cannot hold a hole plus context
# Generated data tables (the stdlib's ~100 codec tables, 15% of its tokens) teach nothing about code.
GENERATED_MARKERS = ("gencodec.py",)


def is_generated(text: str) -> bool:
    head = text[:2000]
    return any(marker in head for marker in GENERATED_MARKERS)


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def build_token_file(manifest: dict, split: str, tokenizer_path: Path, out_dir: Path) -> dict:
    """Tokenize the manifest's `split` ("train" or "heldout") into out_dir; deterministic."""
    tok = TextTokenizer(tokenizer_path)  # what the engine encodes with: text stays text
    if tok.vocab_size > 65535:
        raise ValueError(f"{tokenizer_path}: vocabulary of {tok.vocab_size} does not fit uint16")
    out_dir.mkdir(parents=True, exist_ok=True)
    files, chunks, offsets = [], [], [0]
    for name in manifest[split]:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # a file removed since the manifest was written: skip, and the meta records what was used
        if is_generated(text):
            continue
        ids = tok.encode(text)
        if len(ids) < MIN_FILE_TOKENS:
            continue
        chunks.append(np.asarray(ids, dtype=np.uint16))
        offsets.append(offsets[-1] + len(ids))
        files.append(name)
    tokens = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint16)
    tmp = out_dir / (TOKENS_FILE + ".tmp")
    tokens.tofile(tmp)
    tmp.replace(out_dir / TOKENS_FILE)
    np.save(out_dir / OFFSETS_FILE, np.asarray(offsets, dtype=np.int64))
    meta = {
        "split": split,
        "tokenizer": str(tokenizer_path),
        "tokenizer_sha256": _sha256(tokenizer_path),
        "vocab_size": tok.vocab_size,
        "newline_id": tok.token_id("Ċ"),  # byte-level BPE spells "\n" as "Ċ"
        "num_files": len(files),
        "num_tokens": int(tokens.size),
        "files": files,
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return meta


@dataclass
class TokenCorpus:
    """A memory-mapped token file: `file(i)` is a uint16 view of file i."""

    tokens: np.ndarray
    offsets: np.ndarray
    meta: dict

    @classmethod
    def open(cls, directory: Path) -> "TokenCorpus":
        directory = Path(directory)
        meta_path = directory / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(f"{directory}: no {META_FILE}; build it with `dllm-lsp train --prepare-only`")
        meta = json.loads(meta_path.read_text())
        tokens = np.memmap(directory / TOKENS_FILE, dtype=np.uint16, mode="r")
        offsets = np.load(directory / OFFSETS_FILE)
        if offsets[-1] != tokens.size:
            raise ValueError(f"{directory}: offsets end at {offsets[-1]} but {TOKENS_FILE} holds {tokens.size} tokens")
        return cls(tokens=tokens, offsets=offsets, meta=meta)

    @classmethod
    def from_lists(cls, files: list[list[int]], newline_id: int) -> "TokenCorpus":
        """An in-memory corpus (tests, tiny smoke runs)."""
        offsets = np.cumsum([0] + [len(f) for f in files]).astype(np.int64)
        tokens = np.concatenate([np.asarray(f, dtype=np.uint16) for f in files])
        return cls(tokens=tokens, offsets=offsets, meta={"newline_id": newline_id, "num_files": len(files)})

    @property
    def num_files(self) -> int:
        return len(self.offsets) - 1

    @property
    def newline_id(self) -> int:
        return int(self.meta["newline_id"])

    def file(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]

    def file_weights(self) -> np.ndarray:
        """Sampling probability per file, proportional to its length."""
        lengths = np.diff(self.offsets).astype(np.float64)
        return lengths / lengths.sum()
