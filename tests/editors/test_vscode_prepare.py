"""Where the cursor rests, in real VS Code (code-server + Playwright, editors/vscode/e2e/prepare.mjs):
the real server (`python -m dllm_lsp serve`, started by the extension) with its engine in `remote`
mode on the daemon's real HTTP app over a scripted model (tests/lsp/scripted_engine.py), which
records each place it is asked to prepare. A click and a cursor key that rest are prepared, once
each; typing is not (VS Code reports a typed character as a Keyboard move too: the extension tells
them apart by the document version); a cursor key after typing is again."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "lsp"))
from code_server import Run, build_vsix, needs_code_server, run_code_server, user_settings  # noqa: E402
from editor_env import REAL_SOURCE  # noqa: E402
from scripted_engine import ScriptedDaemon  # noqa: E402

pytestmark = needs_code_server


def test_vscode_prepares_where_a_click_or_cursor_key_rests_not_while_typing(tmp_path, artifacts):
    vsix = build_vsix()
    with ScriptedDaemon() as daemon:
        settings = {**user_settings("real", tmp_path), "dllm.engine.mode": "remote", "dllm.engine.url": daemon.url,
                    "dllm.prefetchNextLine": False}
        run = Run("prepare", REAL_SOURCE + "\n", settings, driver="prepare.mjs", args=["60000"], timeout_s=240)
        result, _ = run_code_server(run, tmp_path, artifacts, vsix)
        prepared = [(r.prefix, r.suffix) for r in daemon.engine.prepare_requests]
    assert result["cursorAfterClick"] == [9, len("    return side * side") + 1], result
    assert result["cursorAfterUp"] == [8, len("def square_area(side):") + 1], result
    assert result["cursorAfterLeft"] == [8, len("def square_area(side): # o") + 1], result
    # Each place the engine prepared, in order: the click, ArrowUp, and ArrowLeft after typing.
    places = [(prefix.split("\n")[-1], suffix.split("\n")[0]) for prefix, suffix in prepared]
    assert places == [("    return side * side", ""), ("def square_area(side):", ""),
                      ("def square_area(side): # o", "k")], prepared
    # Whole windows, as a completion there carries: the prefix from the file's start here.
    prefix, suffix = prepared[0]
    assert prefix.startswith("import math") and suffix.startswith("\n\n\ndef rectangle_area"), prepared[0]
