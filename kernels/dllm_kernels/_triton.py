"""Optional Triton import, so every op file (and its torch reference) imports without Triton.

Triton is an optional dependency (`pip install dllm-lsp[triton]`). Without it the op
files still define their `@triton.jit` functions against a tiny stand-in that leaves
them as plain, never-called Python functions; dispatch then always picks the torch
reference. Nothing here reads environment variables.
"""

from __future__ import annotations

from types import SimpleNamespace

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised only on installs without triton
    HAS_TRITON = False

    def _jit(fn=None, **_kwargs):
        return fn if fn is not None else (lambda f: f)

    def _next_power_of_2(n: int) -> int:
        return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()

    triton = SimpleNamespace(jit=_jit, cdiv=lambda a, b: -(-a // b), next_power_of_2=_next_power_of_2)
    # Annotations such as `BLOCK: tl.constexpr` are evaluated at definition time.
    tl = SimpleNamespace(constexpr=object)


def require_triton(op: str) -> None:
    """Raise a clear error when a Triton launcher is called on an install without Triton."""
    if not HAS_TRITON:
        raise RuntimeError(f"{op}: the Triton path needs `triton` installed (pip install 'dllm-lsp[triton]')")


def check_device(op: str, *tensors) -> None:
    """All tensors on one device; CPU tensors only work under the Triton interpreter."""
    devices = {t.device for t in tensors if t is not None}
    if len(devices) != 1:
        raise ValueError(f"{op}: tensors are on different devices: {sorted(map(str, devices))}")
