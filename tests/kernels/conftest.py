"""Kernel tests: every Triton kernel against its torch reference.

By default the kernels run on CPU tensors under the Triton interpreter. Triton decides
interpreter-or-compiler when its functions (its own `tl.zeros` included) are decorated,
that is when triton is first imported, so TRITON_INTERPRET is set here before anything
in this folder imports triton. If another test area imported triton earlier in the same
session without it (a full `pytest` run without TRITON_INTERPRET=1, which .ci/run and the
README set), the interpreter cannot be switched on any more and these tests are skipped
with that reason. With DLLM_KERNELS_TEST_DEVICE=cuda (benchmarks/gpu_check.sh) the same
tests run compiled on the GPU instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DEVICE = os.environ.get("DLLM_KERNELS_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

triton = pytest.importorskip("triton")
HERE = Path(__file__).resolve().parent


def _interpreter_active() -> bool:
    import triton.language as tl

    return type(tl.zeros).__name__ != "JITFunction"


def pytest_collection_modifyitems(config, items):
    if DEVICE != "cpu" or _interpreter_active():
        return
    skip = pytest.mark.skip(
        reason="triton was imported before tests/kernels/conftest.py could set TRITON_INTERPRET=1; "
        "run `TRITON_INTERPRET=1 pytest` (as .ci/run does) or run tests/kernels on its own"
    )
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents and "device" in item.fixturenames:
            item.add_marker(skip)


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
