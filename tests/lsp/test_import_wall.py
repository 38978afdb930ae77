"""The server starts without torch: importing and building it must not pull torch in."""

from __future__ import annotations

import subprocess
import sys

from .conftest import SERVER_ENV

CHECK = """
import sys
import dllm_lsp.server
import dllm_lsp.commands.serve
from dllm_lsp.cli import build_parser
build_parser()
server = dllm_lsp.server.create_server({"engine": {"mode": "inProcess"}})
heavy = sorted(m for m in ("torch", "triton", "transformers", "safetensors") if m in sys.modules)
print(",".join(heavy))
"""


def test_server_start_does_not_import_torch():
    out = subprocess.run([sys.executable, "-c", CHECK], env=SERVER_ENV, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported at server start: {out.stdout.strip()}"
