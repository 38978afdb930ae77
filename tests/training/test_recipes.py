"""The GPU preset is a valid, shippable shape; ship() only replaces the default model when it is better."""

from __future__ import annotations

import argparse
import json

from dllm_engine.default_model_config import default_model_config
from dllm_engine.training import ship as ship_mod
from dllm_engine.training.args import add_arguments
from dllm_engine.training.run import GPU_PRESET, build_config, parse_duration


def _args(*argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(list(argv))
    args.tokenizer = "tok.json"
    return args


def test_gpu_preset_fits_the_repository_limit(tokenizer):
    cfg = default_model_config(tokenizer, **GPU_PRESET["model"])
    assert 15e6 < cfg.num_params < ship_mod.MAX_BYTES / 2  # bf16: 2 bytes per parameter
    train = build_config(_args("--gpu-preset", "--data", "d", "--out", "o", "--time-budget", "5m"))
    assert train.time_budget_s == 300 and train.stream.batch_size == GPU_PRESET["batch_size"]
    assert train.model["hidden_size"] == 512 and train.workers == GPU_PRESET["workers"]
    small = build_config(_args("--gpu-preset", "--hidden", "32", "--workers", "0"))
    assert small.model["hidden_size"] == 32 and small.model["num_layers"] == 5 and small.workers == 0
    assert parse_duration("1.5h") == 5400 and parse_duration("90") == 90


def _report(single, held):
    return {"summary": [
        {"benchmark": "single-line", "arm": "variable length, threshold 0.9", "n": 61, "pass@1": single, "exact_match": 0},
        {"benchmark": "heldout-line", "arm": "variable length, threshold 0.9", "n": 20, "pass@1": None, "exact_match": held},
        {"benchmark": "single-line", "arm": "oracle length, 1 token/pass", "n": 61, "pass@1": 99.0, "exact_match": 0},
    ]}


def test_ship_only_when_better(tmp_path):
    cand, dest = tmp_path / "cand", tmp_path / "dest"
    cand.mkdir()
    dest.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (cand / name).write_text("new")
        (dest / name).write_text("old")
    (tmp_path / "worse.json").write_text(json.dumps(_report(3.3, 10.0)))
    (tmp_path / "base.json").write_text(json.dumps(_report(3.3, 12.0)))
    (tmp_path / "better.json").write_text(json.dumps(_report(4.9, 0.0)))
    common = ["--candidate", str(cand), "--baseline-eval", str(tmp_path / "base.json"), "--dest", str(dest)]
    assert ship_mod.main(common + ["--candidate-eval", str(tmp_path / "worse.json")]) == 3
    assert (dest / "model.safetensors").read_text() == "old"
    assert ship_mod.main(common + ["--candidate-eval", str(tmp_path / "better.json")]) == 0
    assert (dest / "model.safetensors").read_text() == "new"


def test_ship_breaks_ties_at_the_floor_on_line_mode_then_syntax():
    base = _report(3.3, 0.0)
    for row in base["summary"]:
        row["syntax_valid"] = 40.0
    tied = json.loads(json.dumps(base))
    assert not ship_mod.is_better(tied, base)
    for row in tied["summary"]:
        row["syntax_valid"] = 45.0  # same scores, more of its fills parse
    assert ship_mod.is_better(tied, base)
    line = json.loads(json.dumps(base))
    line["summary"].append({"benchmark": "single-line", "arm": "line mode, threshold 0.9", "n": 61, "pass@1": 6.6,
                            "exact_match": 0, "syntax_valid": 10.0})
    base["summary"].append({"benchmark": "single-line", "arm": "line mode, threshold 0.9", "n": 61, "pass@1": 4.9,
                            "exact_match": 0, "syntax_valid": 90.0})
    assert ship_mod.is_better(line, base)  # line-mode pass@1 comes before the syntax rate
