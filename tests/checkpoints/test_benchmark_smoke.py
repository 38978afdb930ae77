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
