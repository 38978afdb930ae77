"""Ship a trained checkpoint as the embedded default model, only if it is better and small enough.

    python -m dllm_engine.training.ship --candidate runs/gpu/best \\
        --candidate-eval out/eval_gpu.json --baseline-eval out/eval_default.json \\
        --dest engine/dllm_engine/default_model

"Better" compares the two evaluation reports (dllm-lsp eval --out-json) on the
same tasks, in order: single-line pass@1 under the engine's default decoding,
held-out exact match, single-line pass@1 in line mode (as the server decodes a
single line), then the syntax-valid rate over every model arm (a weak model
ties on the first three at the floor; writing code that parses still tells
two of them apart). The repository holds at most MAX_BYTES of model.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

MAX_BYTES = 40 * 1024 * 1024
FILES = ("config.json", "model.safetensors", "tokenizer.json", "training.json")
PRIMARY = ("single-line", "variable length, threshold")
SECONDARY = ("heldout", "variable length, threshold")
LINE_MODE = ("single-line", "line mode, threshold")


def _metric(report: dict, bench_prefix: str, arm_prefix: str, key: str) -> float | None:
    rows = [r for r in report["summary"] if r["benchmark"].startswith(bench_prefix) and r["arm"].startswith(arm_prefix)]
    vals = [r[key] for r in rows if r.get(key) is not None]
    if not vals:
        return None
    total = sum(r["n"] for r in rows if r.get(key) is not None)
    return sum(r[key] * r["n"] for r in rows if r.get(key) is not None) / total


def _syntax_valid(report: dict) -> float | None:
    """The syntax-valid rate over every model arm (the empty fill is the same for both)."""
    rows = [r for r in report["summary"] if not r["arm"].startswith("empty") and r.get("syntax_valid") is not None]
    total = sum(r["n"] for r in rows)
    return sum(r["syntax_valid"] * r["n"] for r in rows) / total if total else None


def score(report: dict) -> tuple[float, ...]:
    """(single-line pass@1, held-out exact match, line-mode pass@1, syntax-valid rate), -1 where missing."""
    keys = (_metric(report, *PRIMARY, "pass@1"), _metric(report, *SECONDARY, "exact_match"),
            _metric(report, *LINE_MODE, "pass@1"), _syntax_valid(report))
    return tuple(-1.0 if v is None else round(v, 6) for v in keys)


def is_better(candidate: dict, baseline: dict) -> bool:
    return score(candidate) > score(baseline)


def ship(run_or_ckpt: Path, dest: Path) -> str:
    """Copy a checkpoint (a run's best/, or a checkpoint folder) into dest; returns what it did."""
    src = run_or_ckpt / "best" if (run_or_ckpt / "best").is_dir() else run_or_ckpt
    size = (src / "model.safetensors").stat().st_size
    if size > MAX_BYTES:
        raise SystemExit(f"ship: {src}/model.safetensors is {size / 2**20:.1f} MiB, over the {MAX_BYTES / 2**20:.0f} MiB limit")
    dest.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        if (src / name).exists():
            shutil.copy(src / name, dest / name)
    return f"shipped {src} -> {dest} ({size / 2**20:.1f} MiB)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--candidate-eval", type=Path, required=True)
    ap.add_argument("--baseline-eval", type=Path, required=True)
    ap.add_argument("--dest", type=Path, required=True)
    args = ap.parse_args(argv)
    cand = json.loads(args.candidate_eval.read_text())
    base = json.loads(args.baseline_eval.read_text())
    verdict = {"candidate": score(cand), "baseline": score(base), "better": is_better(cand, base)}
    print(json.dumps(verdict), file=sys.stderr)
    if verdict["better"]:
        print(ship(args.candidate, args.dest), file=sys.stderr)
        return 0
    print("ship: candidate is not better; the embedded model is unchanged", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
