"""Where the cursor rests, in real headless Neovims (0.11 and 0.7) against the real server with
the suite's real model: the plugin sends `dllm/prepareCompletion` for the end of the line the
cursor rests on in Normal mode (where `A` and `o` type), once per place, after a burst of moves
only for the last; typing in Insert mode sends none, an Insert-mode cursor key does; and the
server prepares those places (dllm.serverStats' cursorPrepare). nvim_prepare_driver.lua drives."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from editor_env import REAL_SOURCE, SERVERS, server_cmd  # noqa: E402
from nvim_run import NVIM_PARAMS, NVIMS, drive  # noqa: E402

LINES = (REAL_SOURCE + "\n").split("\n")
TYPED = "    return width * height"


def places(prepares: list[dict], step: str) -> list[tuple[int, int, str]]:
    return [(p["params"]["position"]["line"], p["params"]["position"]["character"], p["mode"])
            for p in prepares if p["step"] == step]


@pytest.mark.parametrize("which", NVIM_PARAMS)
@pytest.mark.parametrize("kind", [SERVERS["real"]])
def test_nvim_prepares_where_the_cursor_rests_not_while_typing(which, kind, tmp_path, artifacts):
    result = drive(NVIMS[which], server_cmd(kind), tmp_path, artifacts, f"nvim-{which}-prepare", 120000, 0,
                   text=REAL_SOURCE + "\n", driver="nvim_prepare_driver.lua",
                   settings={"debounceMs": 10, "prefetchNextLine": False})
    assert result["status"]["state"] == "ready", result["status"]
    prepares = result["prepares"]
    uri = (tmp_path / "project" / "calc.py").as_uri()
    assert all(p["params"]["textDocument"]["uri"] == uri for p in prepares), prepares
    assert all(isinstance(p["params"]["textDocument"]["version"], int) for p in prepares), prepares
    # Normal mode: `9G` rests on line 9, whose end is sent; `w` stays on that line: nothing new.
    assert places(prepares, "jump") == [(8, len(LINES[8]), "n")], prepares
    assert places(prepares, "along the line") == [], prepares
    # Three `j` 50 ms apart: only the line they stop on, once it rested.
    assert places(prepares, "burst") == [(11, len(LINES[11]), "n")], prepares
    # The server encoded those places' context (the small model, in process).
    after_normal = result["stats_after_normal"]
    assert after_normal["started"] >= 1 and after_normal["complete"] >= 1, after_normal
    assert after_normal["tokensEncoded"] + after_normal["tokensCached"] > 0, after_normal
    assert after_normal["invalid"] == 0, after_normal
    # Insert mode: typing a line, a key each 60 ms and then a pause, sends no prepare at all.
    assert places(prepares, "to the blank line") == [(12, 0, "n")], prepares
    assert result["typed_line"] == TYPED
    assert places(prepares, "typing") == [], prepares
    # A cursor key in Insert mode is a move: the cursor's own place; <Esc> back to the line's end.
    assert places(prepares, "insert-mode cursor key") == [(12, len(TYPED) - 1, "i")], prepares
    assert places(prepares, "back to Normal mode") == [(12, len(TYPED), "n")], prepares
    stats = result["stats"]
    assert stats["started"] >= 3 and stats["invalid"] == 0, stats
