"""Killing `refactor --apply` in the middle leaves every file wholly old or wholly new; a rerun resumes.

Real default model, 40 small Python files, one file in the engine at a time,
so the signal lands while some files are written and others are not.
"""

from __future__ import annotations

import difflib
import json
import signal
import subprocess
import time

import pytest

from .conftest import cli_env, refactor_cmd

N_FILES = 40


def _make_files(root) -> dict[str, str]:
    files = {}
    for i in range(N_FILES):
        text = (f"def area_{i}(w, h):\n    return w * h\n\n\n"
                f"class Box{i}:\n    def size(self):\n        return {i}\n")
        (root / f"m{i:02}.py").write_text(text)
        files[f"m{i:02}.py"] = text
    return files


def _is_whole_new(old: str, new: str) -> bool:
    """New = old plus inserted one-line docstrings, nothing else (a partial write would not be)."""
    ops = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False).get_opcodes()
    for tag, _, _, j1, j2 in ops:
        if tag == "equal":
            continue
        if tag != "insert":
            return False
        for line in new.splitlines()[j1:j2]:
            s = line.strip()
            if not (s.startswith('"""') and s.endswith('"""') and len(s) >= 6):
                return False
    return new.endswith("\n")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_kill_during_apply_leaves_no_partial_file(tmp_path, sig):
    originals = _make_files(tmp_path)
    args = (".", "--recipe", "add-docstrings", "--apply", "--max-tokens", "4", "--files-in-flight", "1",
            "--jobs", "1", "--no-progress")
    # A terminal's Ctrl-C: SIGINT at its default in the child even when this run inherited it ignored
    # (a shell starts background jobs with SIGINT ignored; Python then installs no handler for it).
    proc = subprocess.Popen(refactor_cmd(*args), cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if any((tmp_path / n).read_text() != t for n, t in originals.items()):
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"finished before the kill: {proc.stderr.read()}"
        time.sleep(0.3)  # a few more files in flight
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if sig != signal.SIGKILL:  # SIGTERM and Ctrl-C: a clean stop
        assert proc.returncode == 130, err
        assert "wholly old or wholly new" in err
        assert not list(tmp_path.glob(".*.dllm-tmp")), "a clean stop left a temporary file"
    new = {n: (tmp_path / n).read_text() for n in originals}
    changed = [n for n in originals if new[n] != originals[n]]
    assert changed and len(changed) < N_FILES, "the signal should land in the middle of the run"
    for n in changed:
        assert _is_whole_new(originals[n], new[n]), f"{n} is partial:\n{new[n]}"

    rerun = subprocess.run(refactor_cmd(*args, "--report", "r.json"), cwd=tmp_path, env=cli_env(),
                           capture_output=True, text=True, timeout=240)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    planned = {h["file"].removeprefix("./") for h in report["holes"]}
    filled_before = [n for n in changed if new[n].count('"""') == 2 * 3]  # all three holes were filled
    assert not planned & set(filled_before), "a rerun must not redo files already filled"
    for n in originals:
        assert _is_whole_new(originals[n], (tmp_path / n).read_text())
