"""Partial accept in real Neovims (0.7 and 0.11, the plugin's extmark ghost text): the
accept-word and accept-line keys (editors/nvim/lua/dllm/ghost.lua) take the next word or line
of a multi-line suggestion and leave the rest shown, where the server (real, `python -m dllm_lsp
serve`, its engine `remote` on the daemon's real HTTP app over a scripted model) would answer it
from its suggestion cache; the last line taken, nothing is left; with nothing shown the key does
what it did before. And cycling: with one suggestion shown the next key asks for more (best of
N, whose other fills come as further items) and it and the previous key step through them.
Driven by nvim_partial_driver.lua through Neovim's own key loop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "lsp"))
from nvim_run import NVIM_PARAMS, NVIMS, drive  # noqa: E402
from scripted_engine import ScriptedDaemon  # noqa: E402

BODY = "total = a + b\n    return total"


@pytest.mark.parametrize("which", NVIM_PARAMS)
def test_nvim_takes_a_suggestion_word_by_word_and_line_by_line(which, tmp_path, artifacts):
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [("return total\n    ", "print(total)"), ("def add(a, b):\n    ", BODY)]
        daemon.engine.alternatives = {"return total\n    ": ["del total", "print(a, b)"]}
        settings = {"engine": {"mode": "remote", "url": daemon.url}, "debounceMs": 10,
                    "diffusion": {"invokedCandidates": 3}}
        result = drive(NVIMS[which], [sys.executable, "-m", "dllm_lsp", "serve"], tmp_path, artifacts,
                       f"nvim-{which}-partial", 30000, 10000, driver="nvim_partial_driver.lua", settings=settings)
        fills = [r for r in daemon.engine.infill_requests if r.priority == "interactive" and r.holes[0].max_tokens > 1]
    assert result["shown"]["ghost"] == BODY, result["shown"]
    assert result["after_word"]["buffer"][1] == "    total", result["after_word"]
    assert result["after_word"]["ghost"] == " = a + b\n    return total" and result["after_word"]["cursor"] == [2, 9]
    assert result["after_line"]["buffer"][1] == "    total = a + b", result["after_line"]
    assert result["after_line"]["ghost"] == "\n    return total" and result["after_line"]["cursor"] == [2, 17]
    second = result["after_second_line"]
    assert second["buffer"][1:3] == ["    total = a + b", "    return total"] and second.get("ghost") is None, second
    assert second["cursor"] == [3, len("    return total")]
    assert result["after_word_without_ghost"]["buffer"] == second["buffer"]
    assert fills[0].params.candidates == 1, fills  # one fill; the rest never went back to the engine
    # Cycling: typed, one suggestion; the next key asked (best of N) and showed the second.
    assert result["typed_one"]["ghost"] == "print(total)", result["typed_one"]
    assert result["asked_more"]["ghost"] == "del total", result["asked_more"]
    assert result["cycled"] == ["print(a, b)", "print(total)", "del total", "print(total)"], result["cycled"]
    assert result["accepted_cycled"]["buffer"][3] == "    print(total)", result["accepted_cycled"]
    assert [f.params.candidates for f in fills] == [1, 1, 3], fills  # the body, the new line, the ask
