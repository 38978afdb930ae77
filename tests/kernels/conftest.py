"""Kernel tests: every Triton kernel against its torch reference.

By default the kernels run on CPU tensors under the Triton interpreter: TRITON_INTERPRET
must be set before the `@triton.jit` decorators run (triton decides at decoration time),
so it is set here, before anything imports dllm_kernels, and op modules another test area
imported earlier are reloaded. With DLLM_KERNELS_TEST_DEVICE=cuda (benchmarks/gpu_check.sh)
the same tests run compiled on the GPU instead.
"""

from __future__ import annotations

import importlib
import os
import sys

import pytest

DEVICE = os.environ.get("DLLM_KERNELS_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

_OP_MODULES = ("rmsnorm", "swiglu", "rope", "confidence", "commit", "kv_append", "canvas_attention", "dispatch")


def _reload_compiled_modules() -> None:
    """Reload op modules whose kernels were decorated before the interpreter was switched on."""
    rms = sys.modules.get("dllm_kernels.rmsnorm")
    if rms is None or type(rms._rmsnorm_kernel).__name__ == "InterpretedFunction":
        return
    for name in _OP_MODULES:
        mod = sys.modules.get(f"dllm_kernels.{name}")
        if mod is not None:
            importlib.reload(mod)


if DEVICE == "cpu":
    _reload_compiled_modules()

triton = pytest.importorskip("triton")


@pytest.fixture
def device() -> str:
    if DEVICE == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("DLLM_KERNELS_TEST_DEVICE=cuda but no CUDA device")
    return DEVICE


def _report(actual, expected, atol, rtol, what):
    """Assert closeness; on failure say where the two differ and by how much."""
    import torch

    a, e = actual.detach().float().cpu(), expected.detach().float().cpu()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    bad = ~torch.isclose(a, e, atol=atol, rtol=rtol, equal_nan=True)
    if bad.any():
        idx = bad.nonzero()
        diff = (a - e).abs().masked_fill(~bad, 0)
        worst = tuple(int(i) for i in (diff == diff.max()).nonzero()[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())}/{a.numel()} elements differ (atol={atol}, rtol={rtol}); "
            f"first at {tuple(idx[0].tolist())}: got {a[tuple(idx[0])].item():.6g}, "
            f"want {e[tuple(idx[0])].item():.6g}; worst at {worst}: got {a[worst].item():.6g}, want {e[worst].item():.6g}"
        )


@pytest.fixture
def assert_close():
    return _report


# dtype name -> (atol, rtol). The interpreter handles float32, float16 and bfloat16 loads and
# stores (its float->bfloat16 rounding may differ from torch's by one ulp); its bfloat16
# tl.dot is wrong in triton 3.9, which canvas_attention works around on CPU.
_TOLERANCES = {"float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}


@pytest.fixture
def tolerance():
    return _TOLERANCES.__getitem__
