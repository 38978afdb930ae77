"""Next edits in real headless Neovims (0.11 and 0.7): the real server (`python -m dllm_lsp
serve`) with its engine in `remote` mode on the daemon's real HTTP app over a scripted model
(tests/lsp/scripted_engine.py), so the proposal is known; the plugin shows it, jumps to it and
applies it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "lsp"))
from nvim_run import NVIM_PARAMS, NVIMS, drive  # noqa: E402
from scripted_engine import ScriptedDaemon  # noqa: E402

TEXT = "def area(w, height):\n    return w * height\n\n\nprint(area(2, 3))\n"


@pytest.mark.parametrize("which", NVIM_PARAMS)
def test_nvim_shows_jumps_to_and_applies_a_next_edit(which, tmp_path, artifacts):
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [("return ", "width")]
        result = drive(NVIMS[which], [sys.executable, "-m", "dllm_lsp", "serve"], tmp_path, artifacts,
                       f"nvim-{which}-next-edit", 20000, 0, text=TEXT, file="shapes.py",
                       driver="nvim_next_edit_driver.lua",
                       settings={"engine": {"mode": "remote", "url": daemon.url},
                                 "nextEdit": {"enabled": True, "debounceMs": 0}})
    assert [e["newText"] for e in result["edits"]] == ["width"]
    struck = [m for m in result["marks"] if m["hl"] == "DllmNextEditOld"]
    assert [(m["row"], m["col"], m["end_row"], m["end_col"]) for m in struck] == [(1, 11, 1, 12)]
    assert [m["virt_lines"] for m in result["marks"] if m["virt_lines"]] == [["    return width * height"]]
    assert result["strikethrough"]
    assert result["cursor_after_jump"] == [2, 11]
    assert result["buffer_after_accept"][:2] == ["def area(width, height):", "    return width * height"]
    assert result["marks_after_accept"] == 0 and not result["shown_after_accept"]
