"""The token files: what the manifest excludes, per-file offsets, licence filtering."""

from __future__ import annotations

import json

import numpy as np

from dllm_engine.training.corpus import build_manifest
from dllm_engine.training.packages import is_permissive, license_of
from dllm_engine.training.token_data import TokenCorpus, build_token_file

from dllm_engine.checkpoint import SMALL_MODEL_DIR

TOKENIZER = SMALL_MODEL_DIR / "tokenizer.json"


def test_manifest_excludes_tests_and_humaneval_and_token_file_round_trips(tmp_path, tokenizer):
    root = tmp_path / "lib"
    (root / "pkg" / "tests").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("def a():\n    return 1\n" * 10)
    (root / "pkg" / "b.py").write_text("import os\n\nprint(os.sep)\n" * 10)
    (root / "pkg" / "tests" / "test_a.py").write_text("assert True\n")
    (root / "pkg" / "leak.py").write_text("# from human-eval: HumanEval/0\nx = 1\n")
    (root / "pkg" / "codec.py").write_text('"""Generated from X with gencodec.py."""\n' + "t = 1\n" * 30)
    manifest = build_manifest([root], holdout_every=10**9)  # nothing held out
    names = sorted(p.rsplit("/", 1)[1] for p in manifest["train"])
    assert names == ["a.py", "b.py", "codec.py"]
    assert {r for _, r in manifest["excluded"]} == {"test or vendored folder", "mentions HumanEval"}

    meta = build_token_file(manifest, "train", TOKENIZER, tmp_path / "tok")
    corpus = TokenCorpus.open(tmp_path / "tok")
    assert meta["num_files"] == corpus.num_files == 2  # the generated codec table is skipped
    for i, name in enumerate(meta["files"]):
        assert tokenizer.decode(corpus.file(i).tolist()) == open(name).read()
    assert corpus.tokens.dtype == np.uint16 and corpus.offsets[-1] == corpus.tokens.size
    assert json.loads((tmp_path / "tok" / "meta.json").read_text())["newline_id"] == tokenizer.token_id("Ċ")


def test_only_permissive_licences_are_used():
    mit = "Metadata-Version: 2.1\nName: x\nLicense: MIT\nClassifier: License :: OSI Approved :: MIT License\n\n"
    gpl = "Metadata-Version: 2.1\nName: y\nClassifier: License :: OSI Approved :: GNU General Public License (GPL)\n\n"
    dual = "Metadata-Version: 2.4\nName: z\nLicense-Expression: MIT AND MPL-2.0\n\n"
    assert is_permissive(license_of(mit))
    assert not is_permissive(license_of(gpl)) and not is_permissive(license_of(dual))
