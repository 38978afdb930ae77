import pytest
import torch

from dllm_kernels import dispatch
from dllm_kernels.rmsnorm import rms_norm_reference, rms_norm_triton


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 32), (3, 7, 33), (5, 4096)])
@pytest.mark.parametrize("with_residual", [False, True])
def test_rmsnorm_matches_reference(device, assert_close, tolerance, dtype, shape, with_residual):
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    atol, rtol = tolerance(dtype)
    x = torch.randn(shape, dtype=dt, device=device)
    w = torch.randn(shape[-1], dtype=dt, device=device)
    r = torch.randn(shape, dtype=dt, device=device) if with_residual else None
    got = rms_norm_triton(x, w, 1e-6, r)
    want = rms_norm_reference(x, w, 1e-6, r)
    if with_residual:
        assert_close(got[1], want[1], atol, rtol, "new residual")
        got, want = got[0], want[0]
    assert got.dtype == dt
    assert_close(got, want, atol, rtol, "rmsnorm output")


def test_rmsnorm_non_contiguous_rows(device, assert_close):
    x = torch.randn(6, 64, device=device)[::2]  # row stride 128
    w = torch.rand(64, device=device)
    assert_close(rms_norm_triton(x, w, 1e-5), rms_norm_reference(x, w, 1e-5), 1e-5, 1e-5, "strided rows")


def test_rmsnorm_rejects_bad_input(device):
    x = torch.randn(2, 8, device=device)
    with pytest.raises(ValueError, match="weight shape"):
        rms_norm_triton(x, torch.ones(9, device=device), 1e-6)
    with pytest.raises(ValueError, match="residual"):
        rms_norm_triton(x, torch.ones(8, device=device), 1e-6, torch.randn(2, 8, dtype=torch.float64, device=device))


def test_dispatch_picks_reference_on_cpu_and_honours_force(device, assert_close):
    x = torch.randn(3, 16, device=device)
    w = torch.rand(16, device=device)
    assert dispatch.use_triton(x) == (device == "cuda")
    assert dispatch.use_triton(x, force="triton") and not dispatch.use_triton(x, force="torch")
    with pytest.raises(ValueError, match="force"):
        dispatch.use_triton(x, force="cuda")
    a = dispatch.rms_norm(x, w, 1e-6, force="triton")
    b = dispatch.rms_norm(x, w, 1e-6, force="torch")
    assert_close(a, b, 1e-5, 1e-5, "dispatch")
