"""Choose next edit's confidence threshold (`nextEdit.minConfidence`) on cases that are not the
benchmark's: the same mechanical kinds cut from other standard-library modules
(`next_edit_cases.CALIBRATION_MODULES`, disjoint from the evaluation's `MODULES`).

One engine call per step; every threshold of a grid is applied to the same answers
(`bench_next_edit.proposal_at`), as the server would filter them. The pick: the threshold
with the most exact proposals, then the fewest false ones, among those whose false-proposal
rate is at most `--max-false`; of a plateau of such thresholds, the middle one (a margin either
way, rather than an edge fitted to these few cases).

    .venv/bin/python benchmarks/calibrate_next_edit.py [--models default] [--per-kind 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "engine", ROOT / "kernels", ROOT / "benchmarks"):
    sys.path.insert(0, str(p))

from next_edit_cases import CALIBRATION_MODULES, mechanical_cases, steps_of  # noqa: E402

GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="default")
    ap.add_argument("--per-kind", type=int, default=3)
    ap.add_argument("--max-lines", type=int, default=None, help="the region cap (default: the server's nextEdit.maxLines)")
    ap.add_argument("--max-false", type=float, default=0.10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.max_lines is None:
        from dllm_lsp.server.options import NextEditOptions

        args.max_lines = NextEditOptions().max_lines
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    from bench_next_edit import proposal_at, score_step
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_lsp.server.next_edit.history import EditHistory
    from dllm_lsp.syntax.languages import language_named

    spec = language_named("python")
    cases = mechanical_cases(args.per_kind, CALIBRATION_MODULES)
    print(f"{len(cases)} calibration cases from {', '.join(sorted({c.source.split('.')[0] for c in cases}))}",
          file=sys.stderr)
    for model in args.models.split(","):
        engine = Engine(EngineConfig(model=model, threads=args.threads))
        table: dict[float, dict[str, list]] = {t: defaultdict(list) for t in GRID}
        for case in cases:
            history = EditHistory()
            for step in steps_of(case):
                history.record("doc", step.before, step.after)
                raw, shown, _, region = proposal_at(f"{model}:chosen", engine, step, history, spec, args.max_lines, 0)
                for t in GRID:
                    reps = shown(t)
                    row = table[t]
                    if step.follow_up:
                        r = score_step(step, reps, region)
                        row["exact"].append(r["exact"])
                        row["hit"].append(r["hit"])
                    else:
                        row["false"].append(bool(reps))
        engine.shutdown()
        print(f"\n{model}: threshold | exact | hit | false  ({len(table[0.0]['exact'])} follow-up steps, "
              f"{len(table[0.0]['false'])} without)")
        for t in GRID:
            row = table[t]
            print(f"  {t:.2f} | {_pct(row['exact'])} | {_pct(row['hit'])} | {_pct(row['false'])}")
        ok = [t for t in GRID if _rate(table[t]["false"]) <= args.max_false]
        key = {t: (sum(table[t]["exact"]), -sum(table[t]["false"])) for t in ok}
        plateau = [t for t in ok if key[t] == max(key.values())]
        best = plateau[len(plateau) // 2] if plateau else max(GRID)
        print(f"{model}: pick {best:.2f} (the middle of {', '.join(f'{t:.2f}' for t in plateau)}: the most exact, "
              f"then the fewest false, false <= {args.max_false:.0%})")


def _rate(xs) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _pct(xs) -> str:
    return f"{100 * _rate(xs):.0f}%"


if __name__ == "__main__":
    main()
