import pytest
import torch

from dllm_kernels.swiglu import swiglu_reference, swiglu_triton


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7, 37), (2, 5000)])
@pytest.mark.parametrize("fused", [False, True])
def test_swiglu_matches_reference(device, assert_close, tolerance, dtype, shape, fused):
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    atol, rtol = tolerance(dtype)
    if fused:
        gu = torch.randn(*shape[:-1], 2 * shape[-1], dtype=dt, device=device) * 3
        got, want = swiglu_triton(gu), swiglu_reference(gu)
    else:
        g = torch.randn(shape, dtype=dt, device=device) * 3
        u = torch.randn(shape, dtype=dt, device=device)
        got, want = swiglu_triton(g, u), swiglu_reference(g, u)
    assert got.shape == tuple(shape) and got.dtype == dt
    assert_close(got, want, atol, rtol, "swiglu")


def test_swiglu_non_contiguous_inputs(device, assert_close):
    g = torch.randn(9, 40, device=device).t()  # [40, 9], column-major
    u = torch.randn(40, 9, device=device)
    assert_close(swiglu_triton(g, u), swiglu_reference(g, u), 1e-5, 1e-5, "transposed gate")


def test_swiglu_rejects_bad_input(device):
    with pytest.raises(ValueError, match="even"):
        swiglu_triton(torch.randn(2, 7, device=device))
    with pytest.raises(ValueError, match="differ"):
        swiglu_triton(torch.randn(2, 7, device=device), torch.randn(2, 8, device=device))
