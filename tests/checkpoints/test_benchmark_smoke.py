"""The family benchmarks run end to end at toy size (their numbers come from benchmarks/, not here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_runs_tiny_through_the_engine(capsys):
    _module("gpu_check_checkpoints").main(["--tiny", "--repeats", "1", "--batches", "2", "--refresh", "1,4"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 2
    for row in rows:
        passes = int(row.split("|")[4])
        assert passes >= 1


def test_cache_benchmark_agreement_of_exact_mode_is_one():
    mod = _module("bench_family_cache")
    assert mod.agreement([[1, 2, 3]], [[1, 2, 3]], 4) == 1.0
    assert mod.agreement([[1, 2]], [[1, 9]], 2) == 0.5


def test_real_size_writer_output_loads(tmp_path):
    """bench_real_size_load's streaming writer, at toy sizes: sharded, indexed, loadable."""
    import json
    import sys

    import torch

    from dllm_engine.checkpoint import load

    sys.path.insert(0, str(BENCH))
    ckpt = _module("_real_size_ckpt")
    cfg = ckpt.qwen2(64, 96, 2, 4, 2, 200, False, 150, 151)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    ckpt.write_tokenizer(tmp_path, 200, {"<|endoftext|>": 151, "<|mask|>": 150}, {"eos_token": "<|endoftext|>"})
    on_disk = ckpt.write_sharded(tmp_path, ckpt.qwen2_tensors(cfg), 3)
    assert on_disk == sum(f.stat().st_size for f in tmp_path.glob("model-*.safetensors"))
    lm = load(str(tmp_path), dtype=torch.bfloat16)
    assert lm.config.family == "dream" and lm.config.mask_token_id == 150
    assert torch.isfinite(lm.model.lm_head.weight.float()).all()
