"""`dllm-lsp refactor` end to end on the fixture repository, with the real default model in-process.

The default model's text is not judged (it may be a random-init model); what
is tested is the pipeline: every hole reaches the engine and comes back with
passes, every fill is either applied or has a reason, written files parse
with no new errors, diff mode writes nothing, and a rerun only sees the holes
that were not filled (resumption by idempotence).
"""

from __future__ import annotations

import json

from dllm_lsp.syntax.languages import language_for
from dllm_lsp.syntax.parse_check import new_error_count

from .conftest import run_refactor, snapshot

FAST = ("--max-tokens", "6", "--jobs", "2")


def test_fill_bodies_diff_then_apply_then_resume(repo):
    before = snapshot(repo)
    diff_run = run_refactor(".", "--recipe", "fill-bodies", "--report", "diff.json", *FAST, cwd=repo)
    assert diff_run.returncode == 0, diff_run.stderr
    assert {k: v for k, v in snapshot(repo).items() if k != "diff.json"} == before, "diff mode wrote a file"
    report = json.loads((repo / "diff.json").read_text())
    holes = report["holes"]
    assert len(holes) == 9
    assert {h["file"].rsplit(".", 1)[1] for h in holes} == {"py", "js", "go", "rs"}
    for h in holes:
        assert h["recipe"] == "fill-bodies" and h["passes"] >= 1 and isinstance(h["text"], str)
        assert h["applied"] or h["reason"], h
        assert set(h["range"]) == {"start", "end"}
    applied = [h for h in holes if h["applied"]]
    assert bool(applied) == bool(diff_run.stdout.strip())
    for h in applied:
        assert f"+++ b/{h['file'].removeprefix('./')}" in diff_run.stdout

    apply_run = run_refactor(".", "--recipe", "fill-bodies", "--apply", "--report", "apply.json", *FAST, cwd=repo)
    assert apply_run.returncode == 0, apply_run.stderr
    applied_report = json.loads((repo / "apply.json").read_text())
    written = {f["file"].removeprefix("./") for f in applied_report["files"] if f["status"] == "written"}
    after = snapshot(repo)
    for name, old in before.items():
        if name in written:
            new = after[name].decode()
            assert new != old.decode()
            assert new_error_count(old.decode(), new, language_for(name)) == 0, name
        else:
            assert after[name] == old, f"{name} changed without being reported as written"

    rerun = run_refactor(".", "--recipe", "fill-bodies", "--check", "-q", "--report", "re.json", *FAST, cwd=repo)
    not_filled = sum(not h["applied"] for h in applied_report["holes"])
    assert len(json.loads((repo / "re.json").read_text())["holes"]) == not_filled
    # 4 when a hole the model could not fill is still there (a CI gate must not pass on it).
    assert rerun.returncode == (4 if not_filled else 0) or (rerun.returncode == 1 and not not_filled), rerun.stderr


def test_exit_codes(repo, tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("def f():\n    return 1\n")
    ok = run_refactor(str(clean), "--recipe", "fill-bodies", "--check", cwd=tmp_path)
    assert (ok.returncode, ok.stdout) == (0, ""), ok.stderr

    # The <FILL> marker in pkg/notes.py: any fill that survives shaping is a change.
    changes = run_refactor("pkg/notes.py", "--recipe", "fill-markers", "--check", *FAST, cwd=repo)
    assert changes.returncode == 1, changes.stderr
    assert changes.stdout.startswith("--- a/pkg/notes.py")

    (tmp_path / "blob.py").write_bytes(b"\0\1\2")
    skipped = run_refactor(str(clean), str(tmp_path / "blob.py"), "--recipe", "fill-bodies", cwd=tmp_path)
    assert skipped.returncode == 3 and "blob.py: binary file" in skipped.stderr

    bad_query = run_refactor(str(clean), "--recipe", "regenerate", "--query", "(nope @hole", cwd=tmp_path)
    assert bad_query.returncode == 3 and "does not compile for python" in bad_query.stderr

    bad_recipe = tmp_path / "r.toml"
    bad_recipe.write_text('name = "r"\n[[rule]]\nlanguages = ["python"]\nquery = "(x) @y"\n')
    usage = run_refactor(str(clean), "--recipe-file", str(bad_recipe), cwd=tmp_path)
    assert usage.returncode == 2 and "never captures @hole" in usage.stderr
    no_query = run_refactor(str(clean), "--recipe", "regenerate", cwd=tmp_path)
    assert no_query.returncode == 2 and "--query" in no_query.stderr


def test_canvas_cache_exact_and_delayed_fill_the_same_holes(repo):
    """The default (delayed canvas cache) and --canvas-cache exact see and fill the same holes;
    an unknown cache is a usage error."""
    reports = {}
    for cache in ("exact", "delayed"):
        run = run_refactor(".", "--recipe", "fill-bodies", "--canvas-cache", cache, "-q", "--report",
                           f"{cache}.json", *FAST, cwd=repo)
        assert run.returncode == 0, run.stderr
        reports[cache] = json.loads((repo / f"{cache}.json").read_text())["holes"]
    sites = {cache: sorted((h["file"], json.dumps(h["range"], sort_keys=True)) for h in r) for cache, r in reports.items()}
    assert len(sites["exact"]) == 9 and sites["exact"] == sites["delayed"]
    assert all(h["passes"] >= 1 and (h["applied"] or h["reason"]) for r in reports.values() for h in r)
    bad = run_refactor(".", "--recipe", "fill-bodies", "--canvas-cache", "sometimes", cwd=repo)
    assert bad.returncode == 2 and "canvas-cache" in bad.stderr


def test_candidates_are_checked_before_any_file_is_read(repo):
    """Best of N multiplies the fills per request: a count the engine would refuse per chunk is a
    usage error up front."""
    for args, said in ((("--candidates", "9"), "candidates"),
                       (("--candidates", "8", "--batch-holes", "64"), "--batch-holes x --candidates")):
        bad = run_refactor(".", "--recipe", "fill-bodies", *args, cwd=repo)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
