"""Fixtures for the training and evaluation tests: the real tokenizer, a tiny token corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TOKENIZER = Path(__file__).resolve().parents[2] / "engine" / "dllm_engine" / "default_model" / "tokenizer.json"

SOURCES = [
    "import os\n\n\ndef join(a, b):\n    if not a:\n        return b\n    return os.path.join(a, b)\n\n\n"
    "class Box:\n    def __init__(self, value):\n        self.value = value\n\n    def get(self):\n        return self.value\n",
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\n"
    "def total(items):\n    s = 0\n    for x in items:\n        s += x\n    return s\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n\n"
    "    def pop(self):\n        if not self.items:\n            raise IndexError('empty')\n        return self.items.pop()\n",
]


@pytest.fixture(scope="session")
def tokenizer():
    from dllm_engine.tokenizer import TextTokenizer

    return TextTokenizer(TOKENIZER)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """A data dir (train/ and heldout/ token files) built by the real pipeline from a few files."""
    from dllm_engine.training.token_data import build_token_file

    root = tmp_path_factory.mktemp("data")
    src = root / "src"
    src.mkdir()
    paths = []
    for i, text in enumerate(SOURCES * 3):
        p = src / f"m{i}.py"
        p.write_text(text)
        paths.append(str(p))
    manifest = {"train": paths[:-2], "heldout": paths[-2:]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    build_token_file(manifest, "train", TOKENIZER, root / "train")
    build_token_file(manifest, "heldout", TOKENIZER, root / "heldout")
    return root
