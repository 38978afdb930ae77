"""`--ray local`: files sharded over a local Ray cluster with two CPU workers, one engine each."""

from __future__ import annotations

import json

import pytest

from .conftest import run_refactor, snapshot

ray = pytest.importorskip("ray", reason="Ray is optional (pip install ray); --ray is untested without it")


def test_ray_local_cluster_two_workers_same_holes_as_local(repo):
    before = snapshot(repo)
    proc = run_refactor(".", "--recipe", "fill-bodies", "--ray", "local", "--ray-workers", "2",
                        "--max-tokens", "4", "--report", "ray.json", cwd=repo, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((repo / "ray.json").read_text())
    assert report["summary"]["holes"] == 9
    assert {f["file"] for f in report["files"]} == {"./pkg/geometry.py", "./pkg/notes.py", "./web/cart.js",
                                                      "./gosrc/mathx.go", "./rs/lib.rs"}
    assert all(h["passes"] >= 1 for h in report["holes"])
    assert {k: v for k, v in snapshot(repo).items() if k != "ray.json"} == before


def test_shards_are_round_robin_and_cover_every_file():
    from dllm_lsp.refactor.ray_shard import shard

    assert shard(["a", "b", "c", "d", "e"], 2) == [["a", "c", "e"], ["b", "d"]]
    assert shard(["a"], 4) == [["a"]]
