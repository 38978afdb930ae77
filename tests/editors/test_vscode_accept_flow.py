"""Take a suggestion, pause, press Enter, in real VS Code (code-server + Playwright,
editors/vscode/e2e/accept-flow.mjs): the real server (`python -m dllm_lsp serve`, started by the
extension) with its engine in `remote` mode on the daemon's real HTTP app over a scripted model
(tests/lsp/scripted_engine.py) whose fill of the next line takes 1.5 s. VS Code asks again at the
end of the accepted line at once; the server answers that from its suggestion cache (the line's
suggestion ran to its end), so the next line's prefetch keeps running and the ghost text after
Enter is its answer, with no second fill. The flow against the real small model, in Neovim:
tests/editors/test_nvim.py::test_nvim_next_line_comes_from_the_prefetch."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "lsp"))
from code_server import Run, build_vsix, needs_code_server, run_code_server, user_settings  # noqa: E402
from scripted_engine import ScriptedDaemon  # noqa: E402

pytestmark = needs_code_server

TEXT = "def total(xs):\n    s = 0\n    for x in xs:\n        \n    return s\n"
NEXT_PLACE = "s += x\n        "  # the prefix's end after taking line 4's suggestion and Enter


def test_vscode_takes_a_suggestion_and_finds_the_next_line_prefetched(tmp_path, artifacts):
    vsix = build_vsix()
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [(NEXT_PLACE, "print(s)"), ("        s", " += x")]
        daemon.engine.delays = {NEXT_PLACE: 1.5}  # still filling when VS Code asks at the accepted line's end
        settings = {**user_settings("real", tmp_path), "dllm.engine.mode": "remote", "dllm.engine.url": daemon.url}
        run = Run("accept-flow", TEXT, settings, driver="accept-flow.mjs", args=["60000", "4", "s", "400"],
                  timeout_s=240)
        result, _ = run_code_server(run, tmp_path, artifacts, vsix)
        fills = [r for r in daemon.engine.infill_requests if r.holes[0].max_tokens > 1]  # less the warm-up probe
        cancelled = list(daemon.engine.cancelled_requests)
    assert result["ghost"] == " += x", result
    assert result["afterAccept"][3] == "        s += x", result
    assert result["afterEnter"][3] == "        s += x" and result["afterEnter"][4].startswith("        "), result
    assert result["ghostAfterEnter"] == "print(s)", result
    # Per try (code_server retries a failed browser step once): one fill for the typed suggestion
    # and the prefetch's fill of the next line, not cancelled; then the prefetch of the line after
    # "print(s)" (serving a prefetched line chains the next).
    interactive = [r for r in fills if r.priority == "interactive"]
    ahead = [r for r in fills if r.priority == "batch" and r.holes[0].prefix.endswith(NEXT_PLACE)]
    assert interactive and all(r.holes[0].prefix.endswith("        s") for r in interactive), interactive
    assert len(ahead) == len(interactive), fills
    assert all(r.priority == "interactive" or r in ahead or r.holes[0].prefix.endswith("print(s)\n        ")
               for r in fills), fills
    assert not [r for r in cancelled if r in ahead or r.priority == "interactive"], cancelled
