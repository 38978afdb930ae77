"""The realistic sample files, one per language, shared by several tests."""

from __future__ import annotations

from pathlib import Path

from dllm_lsp.syntax.languages import language_for

SAMPLES = sorted((Path(__file__).parent / "fixtures" / "samples").iterdir())


def load(path: Path):
    spec = language_for(str(path))
    assert spec is not None, path
    return path.read_text(encoding="utf-8"), spec
