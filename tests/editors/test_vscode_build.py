"""The VS Code extension builds offline from the committed lockfile: npm ci,
tsc type-check, the node:test unit tests (Python discovery, settings mapping,
status text), esbuild bundle and vsce package (editors/vscode/scripts/build.sh)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from editor_env import REPO  # noqa: E402

VSCODE = REPO / "editors" / "vscode"


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm not installed (Node.js is needed to build the extension)")
def test_build_script_type_checks_tests_bundles_and_packages():
    proc = subprocess.run([str(VSCODE / "scripts" / "build.sh")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "# fail 0" in proc.stdout or "fail 0" in proc.stdout, proc.stdout[-2000:]
    with zipfile.ZipFile(VSCODE / "dllm-lsp.vsix") as vsix:
        names = set(vsix.namelist())
        manifest = json.loads(vsix.read("extension/package.json"))
    # Bundled: one JS file, no node_modules shipped.
    assert "extension/out/extension.js" in names
    assert not any("node_modules" in n for n in names), sorted(names)
    assert manifest["main"] == "./out/extension.js"
    commands = {c["command"] for c in manifest["contributes"]["commands"]}
    assert {"dllm-lsp.regenerateSelection", "dllm-lsp.fillHoles", "dllm-lsp.toggleCompletions",
            "dllm-lsp.restartEngine", "dllm-lsp.showEngineStatus"} <= commands


def test_setting_choices_are_the_servers():
    """Every choice the VS Code settings UI offers is one the server accepts (a choice the
    server rejects would only show up as a warning at run time)."""
    from dllm_lsp.server.options import CONFIDENCE_KINDS, parse_options

    props = json.loads((REPO / "editors/vscode/package.json").read_text())["contributes"]["configuration"]["properties"]
    assert tuple(props["dllm.diffusion.confidence"]["enum"]) == CONFIDENCE_KINDS
    checked = 0
    for key, spec in props.items():
        for value in spec.get("enum", []):
            path = key.split(".")[1:]  # dllm.diffusion.confidence -> diffusion, confidence
            if path[0] in ("pythonPath", "serverArgs", "serverEnv", "trace"):
                continue  # client-side settings, not server options
            settings: dict = {}
            node = settings
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = value
            _, errors = parse_options(settings)
            assert not errors, (key, value, errors)
            checked += 1
    assert checked >= 3


def test_next_edit_settings_default_to_the_servers():
    """`dllm.nextEdit.*` pass through as the server's `nextEdit` options: same names, same
    defaults (off until measured), and the client's choices parse."""
    from dllm_lsp.server.options import parse_options

    props = json.loads((REPO / "editors/vscode/package.json").read_text())["contributes"]["configuration"]["properties"]
    ours = {k.split(".", 2)[2]: v["default"] for k, v in props.items() if k.startswith("dllm.nextEdit.")}
    options, errors = parse_options({"nextEdit": ours})
    assert not errors, errors
    defaults, _ = parse_options({})
    assert options == defaults, "the extension's nextEdit defaults differ from the server's"
    assert ours["enabled"] is False and set(ours) == {"enabled", "maxLines", "minConfidence", "debounceMs"}
    keys = {(b["command"], b["key"]) for b in json.loads((REPO / "editors/vscode/package.json").read_text())
            ["contributes"]["keybindings"]}
    assert {("dllm-lsp.acceptNextEdit", "tab"), ("dllm-lsp.rejectNextEdit", "escape"),
            ("dllm-lsp.jumpToNextEdit", "tab")} <= keys
