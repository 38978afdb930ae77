"""Writing files safely: CRLF, mode bits, encodings, changed-on-disk, parse check, bad files, batching.

The engine here is scripted (deterministic text), so these test the write path
exactly; the real model runs in test_cli_e2e.py.
"""

from __future__ import annotations

import os
import stat

from dllm_engine.protocol import ProtocolError

from dllm_lsp.refactor.builtin_recipes import builtin_recipe
from dllm_lsp.refactor.planner import collect_files
from dllm_lsp.refactor.runner import RunOptions, refactor_files
from dllm_lsp.syntax.languages import language_named
from dllm_lsp.syntax.parse_check import new_error_count

from .fake_engine import ScriptedClient

FILL = builtin_recipe("fill-bodies")


async def _run(paths, client, recipe=FILL, apply=True, **kw):
    files, missing = collect_files([str(p) for p in paths], recipe)
    results = await refactor_files(files, recipe, client, RunOptions(apply=apply, **kw))
    return {os.path.basename(r.path): r for r in results}, missing


async def test_crlf_mode_bits_and_bom_are_kept(tmp_path):
    path = tmp_path / "tool.py"
    path.write_bytes(b"\xef\xbb\xbf#!/usr/bin/env python\r\ndef f():\r\n    pass\r\n\r\n\r\ndef g():\r\n    return 1\r\n")
    path.chmod(0o751)
    results, _ = await _run([path], ScriptedClient(lambda h: "x = 1\n    return x"))
    assert results["tool.py"].status == "written"
    data = path.read_bytes()
    assert data == (b"\xef\xbb\xbf#!/usr/bin/env python\r\ndef f():\r\n    x = 1\r\n    return x\r\n\r\n\r\n"
                    b"def g():\r\n    return 1\r\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert not [p for p in tmp_path.iterdir() if p.name != "tool.py"], "no temporary file left behind"


async def test_pep263_encoding_round_trips(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nNAME = 'café'\n\n\ndef f():\n    ...\n".encode("latin-1"))
    results, _ = await _run([path], ScriptedClient(lambda h: "return NAME"))
    assert results["latin.py"].status == "written"
    assert path.read_bytes().decode("latin-1").endswith("def f():\n    return NAME\n")
    assert "café".encode("latin-1") in path.read_bytes()


async def test_file_changed_during_the_run_is_not_overwritten(tmp_path):
    path = tmp_path / "busy.py"
    path.write_text("def f():\n    pass\n")
    edited = "def f():\n    pass  # edited by the user meanwhile\n"
    client = ScriptedClient(before_answer=lambda req: path.write_text(edited))
    results, _ = await _run([path], client)
    r = results["busy.py"]
    assert r.status == "not-written" and "changed on disk" in r.reason
    assert path.read_text() == edited
    assert [o.applied for o in r.outcomes] == [False] and "changed on disk" in r.outcomes[0].reason


async def test_fills_adding_syntax_errors_are_not_applied(tmp_path):
    path = tmp_path / "m.py"
    original = "def f():\n    pass\n\n\ndef g():\n    ...\n"
    path.write_text(original)
    answers = iter(["return (1 +", "return 2"])
    results, _ = await _run([path], ScriptedClient(lambda h: next(answers)), files_in_flight=1)
    outcomes = results["m.py"].outcomes
    assert outcomes[1].applied and outcomes[1].replacement == "return 2"
    # Shaping closes the bracket or trims; either way the file must parse as well as before.
    text = path.read_text()
    assert new_error_count(original, text, language_named("python")) == 0
    assert text.endswith("def g():\n    return 2\n")


async def test_a_fill_with_an_indentation_error_is_not_written(tmp_path):
    """Seen with the default model on a standard-library module: a docstring, then a
    statement indented deeper than the block. tree-sitter accepts it, CPython does not."""
    path = tmp_path / "m.py"
    original = "def f(a):\n    ...\n\n\nx = 2\n"
    path.write_text(original)
    fill = '"""\n    doc\n        """\n        return a'
    results, _ = await _run([path], ScriptedClient(lambda h: fill))
    text = path.read_text()
    compile(text, "m.py", "exec")  # written or not, the file compiles
    assert "        return a" not in text  # shaping may keep the docstring, never the over-indented line
    assert results["m.py"].outcomes[0].applied == (text != original)


async def test_diff_mode_writes_nothing(tmp_path):
    path = tmp_path / "m.go"
    original = 'package m\n\nfunc F() int {\n\tpanic("TODO")\n}\n'
    path.write_text(original)
    results, _ = await _run([path], ScriptedClient(lambda h: "return 1"), apply=False)
    r = results["m.go"]
    assert r.status == "changed" and path.read_text() == original
    assert "-\tpanic(\"TODO\")\n+\treturn 1\n" in r.diff and r.diff.startswith("--- a/")


async def test_bad_files_are_reported_and_the_run_goes_on(tmp_path):
    (tmp_path / "bin.py").write_bytes(b"def f():\n    pass\n\0\0\0")
    (tmp_path / "bad.py").write_bytes(b"def f():\n    pass\n# \xff\xfe\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "good.py").write_text("def f():\n    pass\n")
    paths = [tmp_path / n for n in ("bin.py", "bad.py", "notes.txt", "dangling.py", "good.py", "missing.py")]
    results, missing = await _run(paths, ScriptedClient())
    reasons = {name: r.reason for name, r in results.items() if r.status == "skipped"}
    assert "binary" in reasons["bin.py"]
    assert "cannot decode as utf-8" in reasons["bad.py"]
    assert "unknown language" in reasons["notes.txt"]
    assert "cannot read" in reasons["dangling.py"]
    assert [(m.path, m.reason) for m in missing] == [(str(tmp_path / "missing.py"), "no such file or directory")]
    assert results["good.py"].status == "written"


async def test_engine_errors_skip_the_file_with_a_reason(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    pass\n")
    results, _ = await _run([tmp_path], ScriptedClient(error=ProtocolError("context too long")))
    assert results["a.py"].status == "skipped" and "context too long" in results["a.py"].reason


async def test_holes_go_in_batches_of_at_most_64(tmp_path):
    path = tmp_path / "many.py"
    path.write_text("".join(f"def f{i}():\n    pass\n\n\n" for i in range(70)))
    client = ScriptedClient(lambda h: "return 0")
    results, _ = await _run([path], client, apply=False)
    assert sorted(client.request_sizes) == [6, 64]
    assert sum(o.applied for o in results["many.py"].outcomes) == 70


async def test_journal_lets_regenerate_resume(tmp_path):
    import pickle

    from dllm_lsp.refactor.builtin_recipes import regenerate_recipe
    from dllm_lsp.refactor.journal import Journal

    recipe = regenerate_recipe("(return_statement (_) @hole)", languages=["python"])
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    return 1\n")
    b.write_text("def g():\n    return 2\n")
    journal_path = str(tmp_path / "journal.jsonl")
    first = ScriptedClient(lambda h: "41")
    results, _ = await _run([a], first, recipe=recipe, journal=Journal(journal_path, recipe))
    assert results["a.py"].status == "written" and a.read_text() == "def f():\n    return 41\n"
    # The rerun (say, after an interrupt) skips what the journal says is done, and only that.
    again = ScriptedClient(lambda h: "42")
    journal = pickle.loads(pickle.dumps(Journal(journal_path, recipe)))  # as it travels to Ray workers
    results, _ = await _run([a, b], again, recipe=recipe, journal=journal)
    assert results["a.py"].status == "unchanged" and "journal" in results["a.py"].reason
    assert results["b.py"].status == "written" and again.request_sizes == [1]
    a.write_text("def f():\n    return 7\n")  # edited since: no longer what the journal recorded
    results, _ = await _run([a], ScriptedClient(lambda h: "43"), recipe=recipe, journal=Journal(journal_path, recipe))
    assert results["a.py"].status == "written" and a.read_text().endswith("return 43\n")


async def test_planning_in_a_process_pool(tmp_path):
    for i in range(20):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}():\n    pass\n")
    results, _ = await _run([tmp_path], ScriptedClient(lambda h: "return 0"), jobs=2)
    assert len(results) == 20 and all(r.status == "written" for r in results.values())
    assert (tmp_path / "m7.py").read_text() == "def f7():\n    return 0\n"


async def test_a_symlink_stays_a_symlink(tmp_path):
    real = tmp_path / "real.py"
    real.write_text("def f():\n    pass\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    results, _ = await _run([link], ScriptedClient(lambda h: "return 0"))
    assert results["link.py"].status == "written"
    assert link.is_symlink() and real.read_text() == "def f():\n    return 0\n"


async def test_symlinks_leaving_the_tree_are_skipped_and_reported(tmp_path):
    """Issue 16, defect 3: a symlink in the tree to a file outside it was followed, and the
    outside file rewritten. Inside the tree, a file reached twice is refactored once."""
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    secret = outside / "secret.py"
    secret.write_text("def s():\n    pass\n")
    (tree / "escape.py").symlink_to(secret)
    (tree / "real.py").write_text("def f():\n    pass\n")
    (tree / "alias.py").symlink_to(tree / "real.py")
    (tree / "sub").mkdir()
    (tree / "sub" / "up.py").symlink_to(tree / "real.py")
    files, skipped = collect_files([str(tree), str(tree / "real.py"), str(tree / "escape.py")], FILL)
    assert [os.path.basename(f) for f in files] == ["alias.py"]  # real.py and sub/up.py: the same file
    assert [os.path.basename(s.path) for s in skipped] == ["escape.py", "escape.py"]
    assert all("outside the given paths" in s.reason for s in skipped)
    client = ScriptedClient(lambda h: "return 1")
    await refactor_files(files, FILL, client, RunOptions(apply=True))
    assert secret.read_text() == "def s():\n    pass\n"
    assert (tree / "real.py").read_text() == "def f():\n    return 1\n"
    assert (tree / "alias.py").is_symlink()
    # The outside directory given too: then it is one of the roots, and its file is fair game.
    files, skipped = collect_files([str(tree), str(outside)], FILL)
    assert sorted(os.path.basename(f) for f in files) == ["alias.py", "escape.py"] and not skipped


def test_the_cli_reports_a_skipped_symlink(tmp_path):
    import subprocess
    import sys

    (tmp_path / "outside.py").write_text("def s():\n    pass\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link.py").symlink_to(tmp_path / "outside.py")
    r = subprocess.run([sys.executable, "-m", "dllm_lsp", "refactor", str(tree), "--recipe", "fill-bodies",
                        "--apply", "-q"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr  # some files skipped
    assert "link.py" in r.stderr and "outside the given paths" in r.stderr
    assert (tmp_path / "outside.py").read_text() == "def s():\n    pass\n"


async def test_check_has_its_own_exit_status_for_holes_left_unfilled(tmp_path):
    """Issue 16: `--check` exited 0 when a fill was rejected and the marker stayed in the file."""
    from dllm_lsp.refactor.session import EXIT_CHANGES, EXIT_OK, EXIT_UNFILLED, _exit_code

    markers = builtin_recipe("fill-markers", "<FILL>")
    path = tmp_path / "m.py"
    path.write_text("x = <FILL>\n")
    rejected, _ = await _run([path], ScriptedClient(lambda h: ""), recipe=markers, apply=False)
    assert not rejected["m.py"].outcomes[0].applied
    assert _exit_code(list(rejected.values()), check=True) == EXIT_UNFILLED
    assert _exit_code(list(rejected.values()), check=False) == EXIT_OK
    filled, _ = await _run([path], ScriptedClient(lambda h: "1"), recipe=markers, apply=False)
    assert _exit_code(list(filled.values()), check=True) == EXIT_CHANGES
    # Both in one run: unfilled wins (applying the changes would not finish the job).
    assert _exit_code(list(rejected.values()) + list(filled.values()), check=True) == EXIT_UNFILLED
