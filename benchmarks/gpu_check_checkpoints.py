"""GPU check for third-party families: a DiffuCoder-shaped model (Qwen2-7B dims, q/k/v
bias, shifted logits, `<|dlm_pad|>` padding) with random bf16 weights, infilling a
synthetic hole through the resident engine (Engine + FamilyRunner + the engine's
denoiser), with the exact and the approximate context cache.

Reports passes/s, tokens per pass, ms per infill and peak GPU memory, one
Markdown row per setting, ready for benchmarks/RESULTS.md.

    python benchmarks/gpu_check_checkpoints.py            # on the GPU machine (about 2 min)
    python benchmarks/gpu_check_checkpoints.py --tiny     # CPU smoke at toy size
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

import json
import tempfile

from dllm_engine.checkpoint import LoadedModel
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.model import DiffusionTransformer, rope_inv_freq
from dllm_engine.model_config import ModelConfig
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest
from dllm_engine.tokenizer import TextTokenizer

# DiffuCoder-7B = Dream-7B = Qwen2.5-7B dimensions.
FULL = dict(vocab_size=152064, hidden_size=3584, num_layers=28, num_heads=28, num_kv_heads=4, intermediate_size=18944)
TINY = dict(vocab_size=1024, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128)


def random_diffucoder(dims: dict, device: str, dtype: torch.dtype) -> LoadedModel:
    v = dims["vocab_size"]
    # Special ids sit at the top of the vocabulary here; a real checkpoint's come from its tokenizer.
    cfg = ModelConfig(**dims, rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=32768, qkv_bias=True,
                      tie_word_embeddings=False, logits_shift=True, attention="bidirectional", family="diffucoder",
                      mask_token_id=v - 3, eos_token_id=v - 2, pad_token_id=v - 1,
                      extra={"infill": "dlm_pad", "end_ids": [v - 2, v - 1]})
    with torch.device("meta"):
        model = DiffusionTransformer(cfg)
    model = model.to_empty(device=device).to(dtype)
    gen = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 1.0 if "embed" in name else 1.0 / p.shape[-1] ** 0.5, generator=gen)
        model.inv_freq = rope_inv_freq(cfg).to(device)
    return LoadedModel(model=model.eval(), config=cfg, tokenizer=None, path=Path("."), name="random-diffucoder")


def word_tokenizer(vocab: int, folder: Path) -> TextTokenizer:
    """A WordLevel tokenizer where the text `w17` is token 17: synthetic holes as text."""
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {f"w{i}": i for i in range(vocab)}, "unk_token": "w0"}}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    return TextTokenizer(folder / "tokenizer.json")


def start_engine(loaded: LoadedModel, device: str, dtype: str, refresh: int, batch: int, canvas: int) -> Engine:
    """The resident engine over an in-memory model (no 15 GB random checkpoint on disk)."""
    return Engine(EngineConfig(model="synthetic", device=device, dtype=dtype, max_batch=batch, buckets=(canvas,),
                               refresh_every=refresh), loaded=loaded)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="toy size on CPU (smoke test)")
    ap.add_argument("--prefix", type=int, default=1024)
    ap.add_argument("--suffix", type=int, default=256)
    ap.add_argument("--canvas", type=int, default=64)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--refresh", default="1,4")
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.tiny
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    if args.tiny:
        args.prefix, args.suffix, args.canvas = min(args.prefix, 48), min(args.suffix, 16), min(args.canvas, 8)
    loaded = random_diffucoder(TINY if args.tiny else FULL, device, dtype)
    vocab = loaded.config.vocab_size
    loaded.tokenizer = word_tokenizer(vocab, Path(tempfile.mkdtemp()))
    params_gb = sum(p.numel() * p.element_size() for p in loaded.model.parameters()) / 2**30
    print(f"device {torch.cuda.get_device_name() if cuda else 'cpu'}, {dtype}, weights {params_gb:.2f} GiB, "
          f"prefix {args.prefix} suffix {args.suffix} canvas {args.canvas}, threshold {args.threshold}")
    print("| batch | refresh_every | ms / request (median) | passes | passes/s | tokens/pass | peak GiB |")
    print("|---|---|---|---|---|---|---|")
    for batch in (int(b) for b in args.batches.split(",")):
        g = torch.Generator().manual_seed(batch)

        def text(n):
            return " ".join(f"w{i}" for i in torch.randint(0, vocab - 8, (n,), generator=g).tolist())

        holes = [Hole(prefix=text(args.prefix), suffix=text(args.suffix), max_tokens=args.canvas, bucket=args.canvas)
                 for _ in range(batch)]
        for n in (int(x) for x in args.refresh.split(",")):
            eng = start_engine(loaded, device, str(dtype).split(".")[-1], n, batch, args.canvas)
            try:
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                times, result = [], None
                for _ in range(args.repeats + 1):  # the first run warms up
                    req = InfillRequest(holes=holes, params=DiffusionParams(threshold=args.threshold))
                    t0 = time.perf_counter()
                    result = eng.infill(req, timeout=600)
                    times.append(time.perf_counter() - t0)
            finally:
                eng.shutdown()
            dt = statistics.median(times[1:]) if len(times) > 1 else times[0]
            passes = result.passes
            committed = sum(sum(h.committed_per_pass) for h in result.holes) / batch
            peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
            print(f"| {batch} | {n}{' (exact)' if n == 1 else ''} | {dt * 1000:.1f} | {passes} | "
                  f"{passes / dt:.1f} | {committed / max(passes, 1):.2f} | {peak:.1f} |")


if __name__ == "__main__":
    main()
