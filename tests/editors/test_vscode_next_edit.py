"""Next edits in real VS Code (code-server + Playwright, editors/vscode/e2e/next-edit.mjs).

One code-server session. First the real server (`python -m dllm_lsp serve`, started by the
extension) with its engine in `remote` mode on the daemon's real HTTP app over a scripted
model (tests/lsp/scripted_engine.py), so the proposal is known: a parameter renamed at its
definition gives a proposal at its use, off-screen, which Tab jumps to and Tab applies; a
second one is rejected with Esc and not offered again. Then the settings switch the server to
the real small model in process, and a rename plus the explicit command gets a proposal or
none, never an error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "lsp"))
from code_server import SETTINGS_FILE, Run, build_vsix, needs_code_server, run_code_server, user_settings  # noqa: E402
from scripted_engine import ScriptedDaemon  # noqa: E402

pytestmark = needs_code_server

FILLER = 45  # body lines between the definition and the use: the use is below the fold
TEXT = ("def area(w, height):\n    total = 0\n" + "    total += 1\n" * FILLER + "    return w * height\n\n\n"
        "def double(x):\n    return 2 * x\n")
USE_LINE = 3 + FILLER  # 1-based: `    return w * height`
DOUBLE_LINE = USE_LINE + 3
NEXT_EDIT = {"dllm.nextEdit.enabled": True, "dllm.nextEdit.debounceMs": 50}


@pytest.fixture(scope="module")
def vsix() -> Path:
    return build_vsix()


def test_vscode_next_edit_jump_accept_reject_then_the_real_small_model(tmp_path, artifacts, vsix):
    with ScriptedDaemon() as daemon:
        # Most specific first: a hole after `return 2 * ` is the second rename's use.
        daemon.engine.rules = [("return 2 * ", "n"), ("return ", "width")]
        settings = {**user_settings("real", tmp_path), **NEXT_EDIT,
                    "dllm.engine.mode": "remote", "dllm.engine.url": daemon.url}
        # Then the plumbing against a real model, in the same session: the settings switch the
        # server to the small model in process (its proposals are noise, so either answer passes).
        real = {"dllm.engine.mode": "inProcess", "dllm.engine.url": None, "dllm.engine.model": "small",
                "dllm.nextEdit.minConfidence": 0.0}
        run = Run("next-edit", TEXT, settings, driver="next-edit.mjs", file="shapes.py",
                  args=["60000", str(DOUBLE_LINE), SETTINGS_FILE, json.dumps(real), "small"], timeout_s=240)
        result, _ = run_code_server(run, tmp_path, artifacts, vsix)
        requests = list(daemon.engine.next_edit_requests)
    # Off-screen: the status bar named the line, and Tab moved the cursor to the edit.
    assert result["offscreenMessage"] == f"next edit at line {USE_LINE} (Tab jumps)", result
    assert result["cursorBeforeJump"][0] == 1
    assert result["cursorAfterJump"] == [USE_LINE, len("    return ") + 1]
    # The decoration: the old `w` struck through, `width` drawn after it.
    assert result["shown"]["struck"] == ["w"] and result["shown"]["after"] == ["width"], result["shown"]
    assert result["shownSecond"]["struck"] == ["x"] and result["shownSecond"]["after"] == ["n"], result
    # Esc rejected it: asked again for the same version, the server offers nothing.
    assert result["afterRejectAskAgain"] == []
    # With nothing shown, Tab is the editor's own (it indented), undone before saving.
    assert result["tabWithoutProposal"] == ["def double(n    ):"], result
    # Tab applied the first proposal, Esc left the second use alone; saved to disk.
    expected = TEXT.replace("area(w,", "area(width,").replace("return w *", "return width *")
    assert result["savedText"] == expected.replace("double(x)", "double(n)")
    # The engine saw both renames (accepting asks again too).
    assert len(requests) >= 2
    # The real small model answered the explicit request: a proposal or none, and no error.
    assert result["realStatusBar"].startswith("small"), result["realStatusBar"]
    assert result["realOutcome"] in ("proposal", "none"), result
    assert not [t for t in result["toasts"] if "dllm" in t.lower()], result["toasts"]
    log = (artifacts / "vscode-next-edit" / "output-dllm.log").read_text()
    assert "dllm/nextEdit failed" not in log, log[-2000:]
