"""Helpers for the refactor tests: a fresh copy of the fixture repository and a CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE_REPO = Path(__file__).parent / "fixtures" / "repo"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(tmp_path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, dest)
    return dest


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "engine"), str(ROOT / "kernels"),
                                         env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def refactor_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "dllm_lsp", "refactor", *args]


def run_refactor(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(refactor_cmd(*args), cwd=cwd, env=cli_env(), capture_output=True, text=True,
                          timeout=timeout)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
