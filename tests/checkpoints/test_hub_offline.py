"""Hugging Face repo ids resolve from the local cache only, and never hang offline."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dllm_engine.families.hub import resolve_hub_id
from dllm_engine.model_config import CheckpointError


def _fake_cache(root: Path, repo: str) -> Path:
    folder = root / "hub" / f"models--{repo.replace('/', '--')}"
    snap = folder / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("a" * 40)
    return snap


def test_cached_repo_resolves(tmp_path, monkeypatch):
    snap = _fake_cache(tmp_path, "someone/tiny-dream")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve_hub_id("someone/tiny-dream") == snap


@pytest.mark.parametrize("name", ["not-a-repo", "a/b/c", "/abs"])
def test_malformed_id(name):
    with pytest.raises(CheckpointError, match="neither a folder nor"):
        resolve_hub_id(name)


def test_uncached_repo_fails_fast_with_download_command(tmp_path):
    """In a fresh process whose endpoint is unroutable: a network attempt would hang for a long time."""
    code = ("from dllm_engine.families.hub import resolve_hub_id\n"
            "try:\n    resolve_hub_id('owner/never-downloaded')\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_ENDPOINT": "http://10.255.255.1", "HF_HUB_ETAG_TIMEOUT": "600"}
    env.pop("HF_HUB_OFFLINE", None)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 30
    assert "CheckpointError" in out.stdout and "hf download owner/never-downloaded" in out.stdout, out.stdout + out.stderr


def test_offline_flag_restored(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(CheckpointError):
        resolve_hub_id("owner/missing")
    assert "HF_HUB_OFFLINE" not in os.environ
