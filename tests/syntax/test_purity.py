"""The syntax layer is pure: no LSP types, no torch, no engine (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dllm_lsp.syntax.text_lines import line_bounds, next_nonblank_line, previous_nonblank_line

ROOT = Path(__file__).resolve().parents[2]


def test_syntax_modules_import_no_lsp_torch_or_engine():
    modules = sorted(p.stem for p in (ROOT / "dllm_lsp" / "syntax").glob("*.py") if p.stem != "__init__")
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module('dllm_lsp.syntax.' + m)\n"
        "bad = [m for m in ('torch', 'triton', 'pygls', 'lsprotocol', 'dllm_engine') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_line_helpers():
    text = "a\n\n  b\r\n \nc"
    assert line_bounds(text, text.index("b")) == (3, 7)  # end at the newline, after the \r
    assert previous_nonblank_line(text, text.index("c")) == "  b"
    assert previous_nonblank_line(text, text.index("  b")) == "a"
    assert previous_nonblank_line(text, 0) == ""
    assert next_nonblank_line(text, 1) == "  b"
    assert next_nonblank_line(text, text.index("\r") + 1) == "c"
    assert next_nonblank_line(text, len(text)) is None
    assert next_nonblank_line("x\n\n", 1) is None
