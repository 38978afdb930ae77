"""End-to-end denoising pass at a 7B-class shape, built from dllm_kernels.dispatch ops alone.

One pass = 28 Qwen2-style layers (RMSNorm+residual, fused QKV with bias, RoPE, canvas
attention over the cached context, O proj, RMSNorm+residual, fused gate_up, SwiGLU, down)
over a 32-token canvas, then the final norm, the LM head over every canvas slot,
confidence statistics and the commit rule: everything a denoising step runs on the GPU.
Weights are random bf16 (no checkpoint); the context KV cache is random and 2,048 tokens
long. The floor is the time to read every weight once from HBM (4.8 TB/s on an H200).

    python benchmarks/bench_engine_7b.py --device cuda --profile --results benchmarks/RESULTS.md
    python benchmarks/bench_engine_7b.py --device cpu --small      # smoke run, torch path
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from _bench_common import emit, pick_device, section, timer
from dllm_kernels import dispatch

HBM_BYTES_PER_S = 4.8e12  # H200


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int


SHAPES = {
    "7b": Shape(3584, 28, 28, 4, 128, 18944, 152064),  # Dream / DiffuCoder (Qwen2.5-7B)
    "small": Shape(256, 2, 4, 2, 64, 512, 2048),
}


def build_weights(s: Shape, device: str, dtype: torch.dtype) -> dict:
    """Random weights, std 0.02, laid out as a fused-projection inference model holds them."""

    def rnd(*shape, std=0.02):
        return torch.empty(*shape, device=device, dtype=dtype).normal_(0.0, std)

    kv = s.kv_heads * s.head_dim
    layers = [
        dict(
            in_norm=1 + rnd(s.hidden),
            qkv=rnd(s.hidden + 2 * kv, s.hidden),
            qkv_bias=rnd(s.hidden + 2 * kv),
            o=rnd(s.hidden, s.hidden),
            post_norm=1 + rnd(s.hidden),
            gate_up=rnd(2 * s.inter, s.hidden),
            down=rnd(s.hidden, s.inter),
        )
        for _ in range(s.layers)
    ]
    return dict(layers=layers, final_norm=1 + rnd(s.hidden), lm_head=rnd(s.vocab, s.hidden))


def weight_bytes(w: dict) -> int:
    tensors = [t for layer in w["layers"] for t in layer.values()] + [w["final_norm"], w["lm_head"]]
    return sum(t.numel() * t.element_size() for t in tensors)


def denoise_pass(w, s: Shape, x, cache, ctx_lens, cos, sin, masked, threshold, temperature, force=None):
    """x: canvas embeddings [B, L, hidden] -> (commit [B, L] bool, tokens [B, L], logits [B*L, V])."""
    B, L, N = x.shape
    H, Hkv, D = s.heads, s.kv_heads, s.head_dim
    kv = Hkv * D
    eps, scale = 1e-6, D**-0.5
    residual = x.reshape(B * L, N)
    delta = None
    for i, lw in enumerate(w["layers"]):
        # -- attention block --
        if delta is None:
            h = dispatch.rms_norm(residual, lw["in_norm"], eps, force=force)
        else:
            h, residual = dispatch.rms_norm(delta, lw["in_norm"], eps, residual, force=force)
        qkv = F.linear(h, lw["qkv"], lw["qkv_bias"])  # [B*L, N + 2*kv]
        q = qkv[:, :N].view(B, L, H, D).transpose(1, 2)  # [B, H, L, D] view
        k = qkv[:, N : N + kv].view(B, L, Hkv, D).transpose(1, 2)  # [B, Hkv, L, D] view
        v = qkv[:, N + kv :].view(B, L, Hkv, D).transpose(1, 2)
        dispatch.apply_rope(q, k, cos, sin, force=force)
        k_ctx, v_ctx = cache[i]
        o = dispatch.canvas_attention(q, k_ctx, v_ctx, ctx_lens, k, v, scale, force=force)  # [B, H, L, D]
        attn_out = F.linear(o.transpose(1, 2).reshape(B * L, N), lw["o"])
        # -- MLP block --
        h, residual = dispatch.rms_norm(attn_out, lw["post_norm"], eps, residual, force=force)
        delta = F.linear(dispatch.swiglu(F.linear(h, lw["gate_up"]), force=force), lw["down"])
    h, _ = dispatch.rms_norm(delta, w["final_norm"], eps, residual, force=force)
    logits = F.linear(h, w["lm_head"])  # [B*L, V]
    stats = dispatch.confidence_stats(logits, temperature, force=force)
    commit = dispatch.commit_mask(masked, stats.prob.view(B, L), threshold, force=force)
    return commit, stats.token.view(B, L), logits


def make_inputs(s: Shape, batch: int, canvas: int, context: int, device: str, dtype: torch.dtype):
    g = torch.Generator(device="cpu").manual_seed(batch)
    x = torch.randn(batch, canvas, s.hidden, generator=g).to(device, dtype)
    cache = [
        tuple(torch.randn(batch, s.kv_heads, context, s.head_dim, device=device, dtype=dtype) for _ in range(2))
        for _ in range(s.layers)
    ]
    ctx_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    positions = torch.arange(context, context + canvas, device=device)  # canvas follows the context
    cos, sin = dispatch.rope_cos_sin(positions, s.head_dim, theta=1e6)
    masked = torch.rand(batch, canvas, generator=g).to(device) < 0.7
    return x, cache, ctx_lens, cos, sin, masked


def graph_timer(fn, measure):
    """Capture fn in a CUDA graph (no Python or launch overhead at replay) and time the replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # compile every Triton kernel before capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return measure(graph.replay)


def profile_table(fn, rows: int = 15) -> list[str]:
    """Top GPU kernels of a few passes (torch.profiler), as markdown: where a pass spends its time."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    events = sorted(prof.key_averages(), key=lambda e: e.device_time_total, reverse=True)
    total = sum(e.device_time_total for e in events) or 1.0
    out = [
        "",
        "Top GPU kernels over 3 passes (batch 1, triton provider):",
        "",
        "| kernel | calls | total us | share |",
        "| --- | --- | --- | --- |",
    ]
    for e in events[:rows]:
        out.append(f"| `{e.key[:80]}` | {e.count} | {e.device_time_total:.0f} | {e.device_time_total / total:.1%} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None)
    ap.add_argument("--small", action="store_true", help="a 2-layer toy shape (smoke run)")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--canvas", type=int, default=32)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--results", default=None, help="append a section to this markdown file")
    ap.add_argument("--profile", action="store_true", help="CUDA: add the top kernels of a batch-1 pass")
    args = ap.parse_args()
    device = pick_device(args.device)
    s = SHAPES["small" if args.small else "7b"]
    context = min(args.context, 128) if args.small else args.context
    dtype = torch.bfloat16
    measure = timer(device)
    torch.manual_seed(0)
    w = build_weights(s, device, dtype)
    wbytes = weight_bytes(w)
    floor_ms = wbytes / HBM_BYTES_PER_S * 1e3
    lines = [
        f"Shape {s}, canvas {args.canvas}, context {context}, random bf16 weights ({wbytes / 1e9:.2f} GB).",
        f"Floor: weight bytes / {HBM_BYTES_PER_S / 1e12:.1f} TB/s = {floor_ms:.3f} ms (the H200 HBM figure, whatever the machine).",
        "Providers: `triton` = dispatch on CUDA (Triton kernels + cuBLAS matmuls); `torch` = the torch references.",
        "",
        "| batch | provider | eager ms/pass | CUDA-graph ms/pass | graph / floor | KV bytes/pass | logits max rel diff vs torch | commit agreement |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    if device == "cpu":
        lines.insert(3, "CPU run: torch path only; the floor ratio is meaningless here.")
    profile_lines: list[str] = []
    for batch in (int(b) for b in args.batches.split(",")):
        x, cache, ctx_lens, cos, sin, masked = make_inputs(s, batch, args.canvas, context, device, dtype)
        kv_bytes = sum(t.numel() * t.element_size() for pair in cache for t in pair)
        providers = ("torch", "triton") if device == "cuda" else ("torch",)
        ref = None
        for prov in providers:
            force = "torch" if prov == "torch" else None
            run = functools.partial(denoise_pass, w, s, x, cache, ctx_lens, cos, sin, masked, 0.9, 0.0, force=force)
            commit, _, logits = run()
            if ref is None:
                ref = (commit, logits.float())
                diff, agree = "-", "-"
            else:
                rel = ((logits.float() - ref[1]).abs().max() / ref[1].abs().max()).item()
                diff, agree = f"{rel:.2e}", f"{(commit == ref[0]).float().mean().item():.3f}"
            eager = measure(run)
            graph = graph_timer(run, measure) if device == "cuda" else None
            best = graph if graph is not None else eager
            lines.append(
                f"| {batch} | {prov} | {eager:.3f} | {f'{graph:.3f}' if graph else '-'} | {best / floor_ms:.2f}x "
                f"| {kv_bytes / 1e9:.2f} GB | {diff} | {agree} |"
            )
            print(lines[-1], flush=True)
            if args.profile and device == "cuda" and prov == "triton" and batch == 1:
                profile_lines = profile_table(run)
    lines += profile_lines
    emit(section("bench_engine_7b: one denoising pass, 7B-class shape", device, lines), args.results)


if __name__ == "__main__":
    main()
