"""The VS Code extension in real VS Code: code-server in Debian's headless
Chromium, driven by Playwright (editors/vscode/e2e/drive.mjs). Installs the
built .vsix, opens a Python file, types, reads the ghost text, accepts it with
Tab, reads the suggest widget, runs "dllm: Regenerate Selection", and reads the
saved file back. Screenshots land in tests/artifacts/vscode-*/.

Needs `editors/vscode/scripts/setup-e2e.sh` (apt packages, code-server,
playwright-core; a few minutes, ~630 MB); skipped with that reason otherwise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from code_server import Run, build_vsix, needs_code_server, run_code_server, user_settings  # noqa: E402
from editor_env import GHOST_TIMEOUT_MS, REAL_LINE, REAL_SOURCE, REAL_TYPED, SERVERS, no_ghost_text  # noqa: E402

from fake_server import FAKE_COMPLETION, FAKE_ITEM, FAKE_MODEL, REGENERATED  # noqa: E402

pytestmark = needs_code_server


@pytest.fixture(scope="module")
def vsix() -> Path:
    return build_vsix()


def run_vscode(kind: str, tmp_path: Path, artifacts: Path, vsix: Path, timeout_ms: int,
               ghost_timeout_ms: int, scenario: tuple = ()) -> tuple[dict, Path]:
    """drive.mjs; `scenario`: (file text, line, text to type at its end); default: a new line
    after `def add(a, b):`."""
    server_args = [] if kind == "fake" else ["--engine", os.environ.get("DLLM_TEST_ENGINE", "in-process")]
    run = Run(kind, scenario[0] if scenario else "def add(a, b):\n", user_settings(kind, tmp_path, server_args),
              args=[str(timeout_ms), str(ghost_timeout_ms), *([str(scenario[1]), scenario[2]] if scenario else [])],
              timeout_s=timeout_ms / 1000 * 4 + 120)
    return run_code_server(run, tmp_path, artifacts, vsix)


def test_vscode_ghost_text_suggest_and_regenerate_with_fake_server(tmp_path, artifacts, vsix):
    result, source = run_vscode("fake", tmp_path, artifacts, vsix, 30000, 10000)
    assert FAKE_MODEL in result["statusBar"], result["statusBar"]
    assert result["ghost"].strip() == FAKE_COMPLETION
    assert FAKE_ITEM in result["suggestions"], result["suggestions"]
    # Tab accepted the ghost text; regenerate replaced line 1; fill holes replaced
    # the marker; all saved to disk.
    assert result["afterAccept"][:2] == ["def add(a, b):", "    " + FAKE_COMPLETION]
    assert result["afterRegenerate"][:2] == [REGENERATED, "    " + FAKE_COMPLETION]
    assert source.read_text() == f"{REGENERATED}\n    {FAKE_COMPLETION}\ndef sub(a, b):\n    pass"
    # "Show Engine Status" ran dllm.engineStatus; the fake echoes the initialization
    # options it got, so the dllm.* settings reached the server in the contract's shape.
    toast = result["engineStatusToast"]
    assert f"dllm engine ready, model {FAKE_MODEL}" in toast, toast
    assert '"debounceMs": 10' in toast and '"engine": {' in toast and '"mode": "inProcess"' in toast, toast


@pytest.mark.parametrize("kind", [SERVERS["real"]])
def test_vscode_with_real_server(kind, tmp_path, artifacts, vsix):
    """`python -m dllm_lsp serve --engine in-process` with the default model."""
    result, source = run_vscode(kind, tmp_path, artifacts, vsix, 120000, GHOST_TIMEOUT_MS,
                                (REAL_SOURCE, REAL_LINE, REAL_TYPED))
    # code-server, and so the server it starts, inherits the suite's DLLM_LSP_MODEL (tests/conftest.py:
    # the small model); the status bar names the model the engine really loaded (it said "default",
    # the configured name, until the status learned the engine's own).
    assert os.environ["DLLM_LSP_MODEL"] in result["statusBar"], result["statusBar"]
    # Regenerate reached the server: the line changed, or the server said why not.
    regenerated = result["afterRegenerate"][0] != REAL_SOURCE.split("\n")[0]
    assert regenerated or any("regenerate" in t.lower() for t in result["toasts"]), result
    if result["ghost"] is None:
        no_ghost_text()
    assert "dllm engine ready" in result["engineStatusToast"], result["engineStatusToast"]
    filled = result["afterFill"][-1].strip() != "{{fill}}"
    assert filled or any("fill holes" in t.lower() for t in result["toasts"]), result
    first = result["ghost"].split("\n")[0].strip()
    accepted = result["afterAccept"][REAL_LINE - 1]
    assert first and accepted.startswith(REAL_TYPED + first), result
    assert first in source.read_text()
