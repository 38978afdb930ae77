"""Per-op benchmark: torch eager against the Triton kernel, at the shapes of one denoising pass.

Shapes are a 7B-class model (hidden 3584, 28/4 heads of 128, intermediate 18944, vocab
152064) denoising a 32-token canvas for 16 requests over 2,048 cached context tokens.
On CPU only the torch side runs (Triton needs a GPU outside the interpreter); --small
shrinks every shape for a smoke run.

    python benchmarks/bench_kernels.py --device cuda --sweep --results benchmarks/RESULTS.md
    python benchmarks/bench_kernels.py --device cpu --small
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from _bench_common import emit, pick_device, section, timer
from dllm_kernels import canvas_attention, commit, confidence, context_attention, kv_append, rmsnorm, rope, swiglu


def _shape(small: bool) -> dict:
    if small:
        return dict(B=2, L=8, T=64, hidden=256, H=4, Hkv=2, D=64, inter=512, vocab=2048)
    return dict(B=16, L=32, T=2048, hidden=3584, H=28, Hkv=4, D=128, inter=18944, vocab=152064)


def _sdpa_eager(q, kc, vc, lens, kn, vn, scale):
    """The fastest plain-torch canvas attention: native-dtype SDPA over cat(context, canvas)."""
    T = kc.shape[2]
    ctx_visible = torch.arange(T, device=q.device)[None, :] < lens[:, None]
    visible = torch.cat((ctx_visible, torch.ones_like(kn[:, 0, :, 0], dtype=torch.bool)), 1)
    mask = visible[:, None, None, :]
    k, v = torch.cat((kc, kn), 2), torch.cat((vc, vn), 2)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)


def cases(s: dict, device: str, dtype: torch.dtype):
    """(op, shape text, {provider: fn}, bytes moved, flops) per op."""
    B, L, T, N, H, Hkv, D, inter, V = (s[k] for k in ("B", "L", "T", "hidden", "H", "Hkv", "D", "inter", "vocab"))
    rows, es = B * L, torch.finfo(dtype).bits // 8
    rnd = lambda *shape: torch.randn(*shape, device=device, dtype=dtype)  # noqa: E731
    x, r, w = rnd(rows, N), rnd(rows, N), rnd(N)
    yield ("rms_norm+residual", f"[{rows}, {N}]",
           {"torch": lambda: rmsnorm.rms_norm_reference(x, w, 1e-6, r), "triton": lambda: rmsnorm.rms_norm_triton(x, w, 1e-6, r)},
           (4 * rows * N + N) * es, 0)
    gu = rnd(rows, 2 * inter)
    yield ("swiglu (fused gate_up)", f"[{rows}, 2x{inter}]",
           {"torch": lambda: swiglu.swiglu_reference(gu), "triton": lambda: swiglu.swiglu_triton(gu)},
           3 * rows * inter * es, 0)
    q4, k4 = rnd(B, L, H, D).transpose(1, 2), rnd(B, L, Hkv, D).transpose(1, 2)
    cos, sin = rope.rope_cos_sin(torch.arange(T, T + L, device=device), D)
    yield ("rope q+k in place", f"q [{B}, {H}, {L}, {D}]",
           {"torch": lambda: rope.apply_rope_reference(q4, k4, cos, sin), "triton": lambda: rope.apply_rope_triton(q4, k4, cos, sin)},
           2 * (q4.numel() + k4.numel()) * es, 0)
    q, kc, vc, kn, vn = rnd(B, H, L, D), rnd(B, Hkv, T, D), rnd(B, Hkv, T, D), rnd(B, Hkv, L, D), rnd(B, Hkv, L, D)
    lens = torch.full((B,), T, device=device, dtype=torch.int32)
    lens[::2] = T // 2  # variable context lengths in the batch
    scale = D**-0.5
    seen = int(lens.sum()) + B * L
    yield ("canvas_attention", f"B{B} H{H}/{Hkv} L{L} T{T} D{D}",
           {"torch": lambda: canvas_attention.canvas_attention_reference(q, kc, vc, lens, kn, vn, scale),
            "sdpa": lambda: _sdpa_eager(q, kc, vc, lens, kn, vn, scale),
            "triton": lambda: canvas_attention.canvas_attention_triton(q, kc, vc, lens, kn, vn, scale)},
           (2 * seen * Hkv * D + 2 * q.numel()) * es, 4 * seen * H * L * D)
    S = T
    qp, kp, vp = rnd(1, H, S, D), rnd(1, Hkv, S, D), rnd(1, Hkv, S, D)
    zero, full = torch.zeros(1, device=device, dtype=torch.int32), torch.full((1,), S, device=device, dtype=torch.int32)
    yield ("context_attention (prefill)", f"B1 H{H}/{Hkv} S{S} D{D} causal",
           {"torch": lambda: context_attention.context_attention_reference(qp, kp, vp, zero, full, scale),
            "sdpa": lambda: F.scaled_dot_product_attention(qp, kp, vp, is_causal=True, scale=scale, enable_gqa=True),
            "triton": lambda: context_attention.context_attention_triton(qp, kp, vp, zero, full, scale)},
           (2 * qp.numel() + 2 * kp.numel()) * es, 2 * H * S * S * D)
    cache_k, cache_v = rnd(B, Hkv, T + L, D), rnd(B, Hkv, T + L, D)
    start = lens.clone()
    yield ("kv_append", f"[{B}, {Hkv}, {L}, {D}] into T{T + L}",
           {"torch": lambda: kv_append.kv_append_reference(cache_k, cache_v, kn, vn, start),
            "triton": lambda: kv_append.kv_append_triton(cache_k, cache_v, kn, vn, start)},
           4 * kn.numel() * es, 0)
    logits = rnd(rows, V)
    yield ("confidence_stats", f"[{rows}, {V}]",
           {"torch": lambda: confidence.confidence_stats_reference(logits, 0.7),
            "triton": lambda: confidence.confidence_stats_triton(logits, 0.7)},
           rows * V * es, 0)
    masked = torch.rand(B, L, device=device) < 0.5
    conf = torch.rand(B, L, device=device)
    yield ("commit_mask", f"[{B}, {L}]",
           {"torch": lambda: commit.commit_mask_reference(masked, conf, 0.9),
            "triton": lambda: commit.commit_mask_triton(masked, conf, 0.9)},
           B * L * 6, 0)


def attention_sweep(s: dict, device: str, dtype: torch.dtype, measure) -> list[str]:
    """canvas_attention over (block_n, num_splits) at batch 1 and the full batch: which defaults to keep."""
    L, T, H, Hkv, D = (s[k] for k in ("L", "T", "H", "Hkv", "D"))
    out = ["", f"canvas_attention sweep (L{L} T{T} H{H}/{Hkv} D{D}; `auto` = the launcher's choice), ms:", ""]
    out += ["| batch | block_n | splits | ms |", "| --- | --- | --- | --- |"]
    for B in (1, s["B"]):
        rnd = lambda *shape: torch.randn(*shape, device=device, dtype=dtype)  # noqa: E731
        q, kc, vc, kn, vn = rnd(B, H, L, D), rnd(B, Hkv, T, D), rnd(B, Hkv, T, D), rnd(B, Hkv, L, D), rnd(B, Hkv, L, D)
        lens = torch.full((B,), T, device=device, dtype=torch.int32)
        for block_n in (None, 32, 128):
            for splits in (None, 1, 2, 4, 8, 16):
                if block_n is not None and splits not in (None, 1, 8):
                    continue  # a few block sizes at the interesting split counts only
                fn = lambda bn=block_n, sp=splits: canvas_attention.canvas_attention_triton(  # noqa: E731
                    q, kc, vc, lens, kn, vn, D**-0.5, block_n=bn, num_splits=sp
                )
                try:
                    ms = f"{measure(fn):.4f}"
                except Exception as exc:  # e.g. a tile too big for shared memory: report it, keep sweeping
                    ms = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
                out.append(f"| {B} | {block_n or 'auto'} | {splits or 'auto'} | {ms} |")
                print(out[-1], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None)
    ap.add_argument("--small", action="store_true", help="small shapes (smoke run)")
    ap.add_argument("--results", default=None, help="append a section to this markdown file")
    ap.add_argument("--sweep", action="store_true", help="CUDA: also sweep canvas_attention block sizes and splits")
    args = ap.parse_args()
    device = pick_device(args.device)
    dtype = torch.bfloat16
    measure = timer(device)
    s = _shape(args.small)
    lines = [
        f"Shapes: {'small smoke shapes' if args.small else '7B-class pass'} {s}, bf16. Baseline: the best torch eager provider.",
        "",
    ]
    if device == "cpu":
        lines += ["CPU run: torch providers only (Triton kernels need a GPU outside the interpreter).", ""]
    lines += [
        "| op | shape | torch ms | sdpa ms | triton ms | triton vs best torch | triton GB/s | triton TFLOP/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for op, shape, providers, nbytes, flops in cases(s, device, dtype):
        ms = {}
        for name, fn in providers.items():
            if name == "triton" and device != "cuda":
                continue
            ms[name] = measure(fn)
        best_torch = min(v for k, v in ms.items() if k != "triton")
        tri = ms.get("triton")
        fmt = lambda v: f"{v:.4f}" if v is not None else "-"  # noqa: E731
        speed = f"{best_torch / tri:.2f}x" if tri else "-"
        gbs = f"{nbytes / tri / 1e6:.0f}" if tri else "-"
        tfs = f"{flops / tri / 1e9:.1f}" if tri and flops else "-"
        lines.append(f"| {op} | {shape} | {fmt(ms.get('torch'))} | {fmt(ms.get('sdpa'))} | {fmt(tri)} | {speed} | {gbs} | {tfs} |")
        print(lines[-1], flush=True)
    if args.sweep and device == "cuda":
        lines += attention_sweep(s, device, dtype, measure)
    emit(section("bench_kernels: torch eager vs Triton per op", device, lines), args.results)


if __name__ == "__main__":
    main()
