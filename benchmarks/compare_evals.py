"""Paired comparison of two `dllm-lsp eval --out-json` runs (or two arms of one) on the tasks
they share: the rate of each, and the tasks each wins (right where the other is wrong).

    python benchmarks/compare_evals.py A.json "line mode, 1 token/pass" B.json "line mode, 1 token/pass"
    python benchmarks/compare_evals.py --on exact A.json "line mode, threshold 0.9" B.json "..." [--benchmark heldout-line]

`--on passed` (the default) counts HumanEval's tests; `--on exact` counts exact matches, the
measure of held-out holes (they have no tests); `--benchmark` keeps one benchmark's tasks.
"""

from __future__ import annotations

import argparse
import json
import sys


def outcomes(path: str, arm: str, on: str, benchmark: str | None) -> dict[str, bool]:
    rows = json.load(open(path))["outcomes"]
    got = {o["task_id"]: bool(o[on]) for o in rows
           if o["arm"] == arm and o.get(on) is not None and (benchmark is None or o["benchmark"] == benchmark)}
    if not got:
        arms = sorted({o["arm"] for o in rows})
        raise SystemExit(f"{path}: no {on} outcome for arm {arm!r}" + (f" on {benchmark}" if benchmark else "")
                         + f"; arms: {arms}")
    return got


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a_json")
    p.add_argument("a_arm")
    p.add_argument("b_json")
    p.add_argument("b_arm")
    p.add_argument("--on", choices=("passed", "exact", "syntax_ok"), default="passed")
    p.add_argument("--benchmark", help="only this benchmark's tasks (e.g. heldout-line)")
    args = p.parse_args(argv)
    a = outcomes(args.a_json, args.a_arm, args.on, args.benchmark)
    b = outcomes(args.b_json, args.b_arm, args.on, args.benchmark)
    common = sorted(a.keys() & b.keys())
    wins = sum(a[t] and not b[t] for t in common)
    losses = sum(b[t] and not a[t] for t in common)
    pa, pb = sum(a[t] for t in common), sum(b[t] for t in common)
    n = len(common)
    print(f"{n} common tasks ({args.on}): A {pa}/{n} = {100 * pa / n:.1f}%, B {pb}/{n} = {100 * pb / n:.1f}%; "
          f"A wins {wins}, B wins {losses}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
