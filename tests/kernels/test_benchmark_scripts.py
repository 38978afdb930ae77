"""The benchmark scripts only run in full on a GPU; here their CPU paths and the layer stack
they time are checked, so a GPU session finds them working."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_engine_7b as engine_bench  # noqa: E402


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_stack_triton_matches_torch(device, dtype):
    """The benchmark's 2-layer stack, all ops through dispatch: Triton path vs torch path."""
    dt = getattr(torch, dtype)
    s = engine_bench.SHAPES["small"]
    torch.manual_seed(0)
    w = engine_bench.build_weights(s, device, dt)
    x, cache, _, cos, sin, masked = engine_bench.make_inputs(s, 3, 7, 40, device, dt)
    ctx_lens = torch.tensor([40, 3, 0], dtype=torch.int32, device=device)
    args = (w, s, x, cache, ctx_lens, cos, sin, masked, 0.5, 0.7)
    c_ref, t_ref, l_ref = engine_bench.denoise_pass(*args, force="torch")
    c_tri, t_tri, l_tri = engine_bench.denoise_pass(*args, force="triton")
    diff = (l_tri.float() - l_ref.float()).abs().max()
    rel = (diff / l_ref.float().abs().max()).item()
    assert rel < (1e-5 if dtype == "float32" else 3e-2), f"logits differ by {rel:.2e} (relative)"
    # tokens must agree wherever the reference's top-2 gap exceeds the paths' difference
    top2 = l_ref.float().topk(2, dim=-1).values
    clear = ((top2[:, 0] - top2[:, 1]) > 2 * diff).view_as(t_ref)
    assert torch.equal(t_tri[clear], t_ref[clear]), f"tokens differ at {(t_tri != t_ref).nonzero().tolist()}"
    if dtype == "float32":
        assert torch.equal(c_tri, c_ref)
    for commit in (c_ref, c_tri):  # >= 1 commit per row with work left, none elsewhere
        assert commit.any(dim=-1).tolist() == masked.any(dim=-1).tolist()
        assert not (commit & ~masked).any()


@pytest.mark.parametrize("script", ["bench_kernels.py", "bench_engine_7b.py"])
def test_benchmark_smoke_run_on_cpu(tmp_path, script):
    results = tmp_path / "RESULTS.md"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    extra = ["--batches", "1,2"] if script == "bench_engine_7b.py" else []
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--device", "cpu", "--small", "--results", str(results), *extra],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = results.read_text()
    assert text.count("\n## ") == 1 and "CPU run" in text and "| --- |" in text
