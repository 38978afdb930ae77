"""A broken checkpoint given to a command prints one line naming the file and the key; the traceback
only with -v (issue 16, defect 7: every checkpoint error printed a full traceback)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest


@pytest.fixture()
def broken(tiny_model, tmp_path):
    dst = tmp_path / "ckpt"
    shutil.copytree(tiny_model, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["dllm_lsp_config"]["hidden_size"] = "2\n56"
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _infill(broken, tmp_path, *flags):
    src = tmp_path / "t.py"
    src.write_text("def f():\n    return \n")
    return subprocess.run([sys.executable, "-m", "dllm_lsp", "infill", "--model", str(broken), "--at", "2:12",
                           *flags, str(src)], capture_output=True, text=True, timeout=120)


def test_infill_says_one_line_and_the_traceback_with_v(broken, tmp_path):
    out = _infill(broken, tmp_path)
    assert out.returncode == 1 and not out.stdout
    [line] = out.stderr.strip().splitlines()
    assert "config.json" in line and "hidden_size must be an integer" in line and "-v" in line, line
    verbose = _infill(broken, tmp_path, "-v")
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr and "hidden_size" in verbose.stderr


def test_engine_serve_logs_one_line(broken, tmp_path):
    sock = tmp_path / "run" / "engine.sock"
    proc = subprocess.run([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--model", str(broken),
                           "--socket", str(sock), "--idle-exit", "0.5"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1  # a daemon that never loaded its model failed
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "config.json: hidden_size must be an integer" in lines[0], proc.stderr
