"""Real-size loading: wall time to a loaded engine and peak RSS over the weights' bytes (issue 15).

For each shape: write a random-weight checkpoint in the family's on-disk format to a temp
folder on local disk (removed afterwards), drop the page cache (root only), then in a fresh
subprocess build the Engine and run one forward, reading VmHWM (peak RSS, file-backed pages
included) from /proc/self/status. The ratio is (peak - RSS just before loading) / bytes on disk.
`--tree DIR` measures another copy of the code (e.g. the tree before a fix) side by side.

    sudo python benchmarks/bench_real_size_load.py --shapes dream-1.5b --tree /tmp/old-tree
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _real_size_shapes import SHAPES, write_shape  # noqa: E402


def _status() -> dict[str, int]:
    out = {}
    for line in open("/proc/self/status"):
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(rest.split()[0]) * 1024
    return out


def child(path: str, dtype: str, context: int, canvas: int, threads: int) -> None:
    """Runs in the fresh subprocess: load through the Engine, one forward, print one JSON line."""
    import torch

    import dllm_engine
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.families.attention import forward_logits

    torch.set_num_threads(threads)
    with open("/proc/self/clear_refs", "w") as fh:  # "5": reset VmHWM to the current RSS
        fh.write("5")
    before = _status()
    t0 = time.perf_counter()
    engine = Engine(EngineConfig(model=path, device="cpu", dtype=dtype, threads=threads, heal=False))
    load_s = time.perf_counter() - t0
    loaded = _status()
    model, cfg = engine.loaded.model, engine.loaded.config
    ids = torch.randint(0, min(cfg.vocab_size, 1000), (1, context + canvas))
    ids[0, context:] = cfg.mask_token_id if cfg.family != "diffusion_gemma" else ids[0, context:]
    valid = torch.ones_like(ids, dtype=torch.bool)
    t1 = time.perf_counter()
    own = getattr(model, "forward_logits", None)  # DiffusionGemma: prompt then one canvas
    logits = own(ids, valid) if own else forward_logits(model, ids, valid)
    forward_s = time.perf_counter() - t1
    after = _status()
    engine.shutdown()
    print(json.dumps({"code": str(Path(dllm_engine.__file__).parents[2]), "load_s": load_s, "forward_s": forward_s,
                      "rss_before": before["VmRSS"], "rss_loaded": loaded["VmRSS"], "peak": after["VmHWM"],
                      "anon": after["RssAnon"], "file": after["RssFile"], "finite": bool(torch.isfinite(logits).all())}))


def drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def measure(tree: Path, path: Path, args) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(tree / p) for p in ("", "engine", "kernels")))
    cmd = [sys.executable, __file__, "--child", str(path), "--dtype", args.dtype, "--context", str(args.context),
           "--canvas", str(args.canvas), "--threads", str(args.threads)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"child failed ({tree}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="dream-1.5b", help=f"comma-separated, of: {', '.join(SHAPES)}")
    ap.add_argument("--tree", action="append", default=[], help="another code tree to measure too (repeatable)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--canvas", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gemma-layers", type=int, default=None, help="DiffusionGemma text layers (default: 6 of 30)")
    ap.add_argument("--dir", default=None, help="where to write checkpoints (default: a temp dir on local disk)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.dtype, args.context, args.canvas, args.threads)
    trees = [ROOT] + [Path(t).resolve() for t in args.tree]
    print("| shape | code | on disk | load s | forward s | peak RSS - before | ratio | RSS anon / file after |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"realsize-{shape}-", dir=args.dir))
        try:
            t0 = time.perf_counter()
            on_disk = write_shape(shape, work, **({"layers": args.gemma_layers}
                                                   if shape == "diffusion-gemma" and args.gemma_layers else {}))
            written = time.perf_counter() - t0
            for tree in trees:
                cold = drop_caches()
                r = measure(tree, work, args)
                if not r["finite"]:
                    print(f"<!-- {shape}: the forward gave non-finite logits -->")
                if Path(r["code"]) != tree:
                    raise SystemExit(f"the child ran {r['code']}, not {tree} (PYTHONPATH not honoured?)")
                grow = r["peak"] - r["rss_before"]
                code = "this tree" if tree == ROOT else tree.name
                print(f"| {shape} | {code} | {on_disk / 2**30:.2f} GiB | {r['load_s']:.1f}{'' if cold else ' (warm)'} | "
                      f"{r['forward_s']:.1f} | {grow / 2**30:.2f} GiB | {grow / on_disk:.2f}x | "
                      f"{r['anon'] / 2**30:.2f} / {r['file'] / 2**30:.2f} GiB |", flush=True)
            print(f"<!-- {shape}: written in {written:.0f} s -->", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
