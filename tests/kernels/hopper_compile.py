"""Compile every kernel, as its launcher would launch it, for an H100/H200 (sm_90) on a
machine without a GPU: Triton's own compiler and bundled ptxas, down to a cubin.

The launchers run on small CPU tensors with each kernel object swapped for a recorder that
captures (args, constexprs, num_warps, num_stages) instead of launching; the recorded call
is then compiled with triton.compile for GPUTarget("cuda", 90, 32). This catches what the
interpreter cannot: type and scoping errors in compiled Triton, shared-memory overflows,
illegal dot shapes, and register spills on the bf16/fp16 paths. Must run without
TRITON_INTERPRET (tests/kernels/test_compile_hopper.py starts it in a fresh process).
Prints one line per kernel variant; exits 1 on any failure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import traceback

assert not os.environ.get("TRITON_INTERPRET"), "run without TRITON_INTERPRET: compiled Triton is the point"

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from dllm_kernels import (  # noqa: E402
    _attention_kernel, canvas_attention, commit, confidence, context_attention, kv_append, rmsnorm, rope, swiglu,
)

TARGET = GPUTarget("cuda", 90, 32)
_PTR = {torch.float32: "*fp32", torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.int32: "*i32",
        torch.int64: "*i64", torch.uint8: "*u8"}


class Recorder:
    """Stands in for a JITFunction: `kernel[grid](*args, **kwargs)` records instead of launching."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((args, kwargs))


def _arg_type(value) -> str:
    if isinstance(value, torch.Tensor):
        return _PTR[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"unexpected kernel argument {value!r}")


def compile_call(fn, args, kwargs, overrides):
    kwargs = {**kwargs, **overrides}
    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
    names = fn.arg_names
    signature, constexprs = {}, {}
    for name, value in zip(names, args, strict=False):  # trailing params are constexprs
        signature[name] = _arg_type(value)
    for name in names[len(args):]:
        signature[name] = "constexpr"
        constexprs[name] = kwargs[name]
    return triton.compile(ASTSource(fn, signature, constexprs=constexprs), target=TARGET, options=options)


def resource_usage(cubin: bytes) -> dict:
    """{'REG': n, 'STACK': bytes, ...} from the cuobjdump bundled with triton."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        out = subprocess.run([tool, "--dump-resource-usage", fh.name], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", out)}


def record(module, kernel_names, launch):
    """Run `launch()` with the named kernels of `module` swapped for recorders."""
    originals = {n: getattr(module, n) for n in kernel_names}
    recorders = {n: Recorder(f) for n, f in originals.items()}
    try:
        for n, r in recorders.items():
            setattr(module, n, r)
        launch()
    finally:
        for n, f in originals.items():
            setattr(module, n, f)
    return recorders


def cases():
    """(name, module holding the kernels, kernel names, launch, constexpr overrides) per variant."""
    bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    i32 = dict(dtype=torch.int32)
    r = lambda *s, dt=bf16: torch.randn(*s).to(dt)  # noqa: E731
    attn = ["_attn_fwd_kernel", "_attn_combine_kernel"]
    gpu_dots = {"DOT_F32": False}  # on CPU tensors the launcher picks float32 dots (interpreter workaround)

    yield "rmsnorm bf16 3584 +residual", rmsnorm, ["_rmsnorm_kernel"], (
        lambda: rmsnorm.rms_norm_triton(r(4, 3584), r(3584), 1e-6, r(4, 3584))), {}
    yield "rmsnorm fp32 64", rmsnorm, ["_rmsnorm_kernel"], (
        lambda: rmsnorm.rms_norm_triton(r(4, 64, dt=f32), r(64, dt=f32), 1e-6)), {}
    yield "swiglu bf16 fused 18944", swiglu, ["_swiglu_kernel"], lambda: swiglu.swiglu_triton(r(4, 2 * 18944)), {}
    cos, sin = rope.rope_cos_sin(torch.arange(4), 128)
    yield "rope bf16 28/4 x 128", rope, ["_rope_kernel"], (
        lambda: rope.apply_rope_triton(r(1, 28, 4, 128), r(1, 4, 4, 128), cos, sin)), {}
    lens = torch.tensor([64, 10], **i32)
    for dt, dim, group, splits in ((bf16, 128, 7, 1), (bf16, 128, 7, 4), (f16, 64, 4, 1), (f32, 32, 1, 1)):
        name = f"canvas_attention {str(dt)[6:]} D{dim} G{group} splits{splits}"
        ctx = [r(2, 4, 64, dim, dt=dt) for _ in range(2)]
        canvas = [r(2, 4, 32, dim, dt=dt) for _ in range(2)]
        args = (r(2, 4 * group, 32, dim, dt=dt), *ctx, lens, *canvas, dim**-0.5)
        yield name, _attention_kernel, attn, (
            lambda a=args, s=splits: canvas_attention.canvas_attention_triton(*a, num_splits=s)), {"DOT_F32": dt == f32}
    empty, canvas = r(1, 4, 0, 128), r(1, 4, 32, 128)
    yield "canvas_attention bf16 D128 no context", _attention_kernel, attn, (
        lambda: canvas_attention.canvas_attention_triton(
            r(1, 28, 32, 128), empty, empty, torch.zeros(1, **i32), canvas, canvas, 0.1)), gpu_dots
    cache = r(1, 4, 256, 128)
    yield "context_attention bf16 D128 causal", _attention_kernel, attn, (
        lambda: context_attention.context_attention_triton(
            r(1, 28, 256, 128), cache, cache, torch.zeros(1, **i32), torch.full((1,), 256, **i32), 0.1)), gpu_dots
    yield "kv_append bf16 D128", kv_append, ["_kv_append_kernel"], (
        lambda: kv_append.kv_append_triton(cache, cache, canvas, canvas, torch.tensor([0]))), {}
    yield "confidence bf16 V152064", confidence, ["_confidence_kernel"], (
        lambda: confidence.confidence_stats_triton(r(4, 152064), 0.7)), {}
    yield "confidence fp32 V1000", confidence, ["_confidence_kernel"], (
        lambda: confidence.confidence_stats_triton(r(4, 1000, dt=f32), 1.0)), {}
    yield "commit [16, 32]", commit, ["_commit_kernel"], (
        lambda: commit.commit_mask_triton(torch.rand(16, 32) < 0.5, torch.rand(16, 32), 0.9)), {}


def main() -> int:
    failures = 0
    for name, module, kernel_names, launch, overrides in cases():
        recorders = record(module, kernel_names, launch)
        for kname, rec in recorders.items():
            for args, kwargs in rec.calls:
                try:
                    k = compile_call(rec.fn, args, kwargs, {o: v for o, v in overrides.items() if o in rec.fn.arg_names})
                    use = resource_usage(k.asm["cubin"])
                    # register spills (stack) slow the hot path; only the float32 test path may spill
                    if use.get("STACK", 0) and "float32" not in name and "fp32" not in name:
                        raise RuntimeError(f"spills to the stack: {use}")
                    print(f"ok    {name} :: {kname} ({use.get('REG')} regs, stack {use.get('STACK')}, "
                          f"shared {k.metadata.shared} B, {k.metadata.num_warps} warps)", flush=True)
                except Exception:  # report every variant, then fail
                    failures += 1
                    print(f"FAIL  {name} :: {kname}\n{traceback.format_exc()}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
