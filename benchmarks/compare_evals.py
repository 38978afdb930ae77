"""Paired comparison of two `dllm-lsp eval --out-json` runs (or two arms of one) on the tasks
they share: pass@1 of each, and the tasks each wins (passes where the other fails).

    python benchmarks/compare_evals.py A.json "line mode, 1 token/pass" B.json "line mode, 1 token/pass"
"""

from __future__ import annotations

import json
import sys


def passed(path: str, arm: str) -> dict[str, bool]:
    outcomes = json.load(open(path))["outcomes"]
    got = {o["task_id"]: bool(o["passed"]) for o in outcomes if o["arm"] == arm and o["passed"] is not None}
    if not got:
        arms = sorted({o["arm"] for o in outcomes})
        raise SystemExit(f"{path}: no arm {arm!r}; arms: {arms}")
    return got


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        raise SystemExit(__doc__)
    a, b = passed(argv[0], argv[1]), passed(argv[2], argv[3])
    common = sorted(a.keys() & b.keys())
    wins = sum(a[t] and not b[t] for t in common)
    losses = sum(b[t] and not a[t] for t in common)
    pa, pb = sum(a[t] for t in common), sum(b[t] for t in common)
    n = len(common)
    print(f"{n} common tasks: A {pa}/{n} = {100 * pa / n:.1f}%, B {pb}/{n} = {100 * pb / n:.1f}%; "
          f"A wins {wins}, B wins {losses}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
