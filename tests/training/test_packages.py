"""The larger corpus (training/packages.py): installed distributions are kept by the licence
their metadata declares, each capped, beside the standard library, and the corpus rules (no
tests, nothing mentioning HumanEval) still hold for them."""

from pathlib import Path

from dllm_engine.training import corpus, packages


def _dist(site: Path, name: str, licence_lines: str, files: dict[str, str], top_level: bool = True) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{licence_lines}\n")
    if top_level:
        (info / "top_level.txt").write_text(f"{name}\n")
    else:  # only a RECORD names the package's folder
        (info / "RECORD").write_text("".join(f"{name}/{f},,\n" for f in files) + f"{name}-1.0.dist-info/METADATA,,\n")
    for rel, text in files.items():
        path = site / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    code = "def f(x):\n    return x + 1\n" * 20
    _dist(site, "mitpkg", "License: MIT", {"a.py": code, "b.py": code, "c.py": code, "tests/t.py": code})
    _dist(site, "bsdpkg", "Classifier: License :: OSI Approved :: BSD License", {"m.py": code}, top_level=False)
    _dist(site, "gplpkg", "License: GPL-3.0-or-later", {"g.py": code})
    _dist(site, "dualpkg", "License-Expression: MIT OR GPL-2.0", {"d.py": code})
    _dist(site, "leaky", "License: Apache-2.0", {"e.py": "# HumanEval/0\n" + code})
    return site


def test_only_permissive_distributions_are_found_by_metadata_or_record(tmp_path):
    site = _site(tmp_path)
    found = {p.name: lic for p, lic in packages.permissive_package_dirs(site)}
    assert set(found) == {"mitpkg", "bsdpkg", "leaky"}  # GPL, and MIT-or-GPL, left out
    assert found["bsdpkg"] == "BSD License"


def test_the_manifest_adds_capped_packages_beside_the_stdlib_with_the_corpus_rules(tmp_path, monkeypatch):
    site = _site(tmp_path)
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    (stdlib / "os_like.py").write_text("import sys\n" * 10)
    monkeypatch.setattr(corpus, "default_roots", lambda: [stdlib])
    assert packages.training_manifest(site=site)["train"] + packages.training_manifest(site=site)["heldout"] == \
        [str(stdlib / "os_like.py")]
    one_file = (site / "mitpkg" / "a.py").stat().st_size
    manifest = packages.training_manifest(True, package_cap_mb=2.5 * one_file / 2**20, site=site)
    files = manifest["train"] + manifest["heldout"]
    names = {Path(f).name for f in files}
    assert "os_like.py" in names and "m.py" in names
    assert "t.py" not in names and "e.py" not in names and "g.py" not in names and "d.py" not in names
    assert len([f for f in manifest["train"] if "/mitpkg/" in f]) <= 2  # the cap: 2.5 files' bytes
    assert manifest["licences"][str(site / "mitpkg")] == "MIT"
