"""Latency of the syntax layer per keystroke: tree update, completion context, output shaping.

Replays typing of one statement at several places of each sample file (and of
a 40x larger copy), timing each piece; shaping gets the rest of the statement
plus one line too many, as a good model would return. Baseline: a fresh parse of the whole
document, which is what the layer would cost without incremental parsing.

    OMP_NUM_THREADS=1 python benchmarks/bench_syntax.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from dllm_lsp.syntax.context import completion_context
from dllm_lsp.syntax.document_tree import DocumentTree
from dllm_lsp.syntax.languages import language_for, parse
from dllm_lsp.syntax.shaping import shape_completion

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "tests" / "syntax" / "fixtures" / "samples").iterdir())
TYPED = "value = compute(a, b)"  # typed character by character at each place


def _ms(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples) * 1e3, samples[int(0.95 * (len(samples) - 1))] * 1e3


def bench(text: str, spec, places: int = 8) -> dict[str, tuple[float, float]]:
    doc = DocumentTree(text, spec)
    times: dict[str, list[float]] = {"fresh parse": [], "tree update": [], "context": [], "shaping": []}
    line_ends = [i for i, ch in enumerate(text) if ch == "\n"]
    for place in line_ends[:: max(1, len(line_ends) // places)][:places]:
        insert_at = place
        doc.replace(insert_at, insert_at, "\n")
        cursor = insert_at + 1
        for i, ch in enumerate(TYPED):
            t0 = time.perf_counter()
            doc.replace(cursor, cursor, ch)
            t1 = time.perf_counter()
            cursor += 1
            ctx = completion_context(doc.text, cursor, spec, tree=doc.tree)
            t2 = time.perf_counter()
            # What a good model would say: the rest of the statement, then more than asked for.
            shape_completion(doc.text, cursor, TYPED[i + 1 :] + "\nnext_line = 1", ctx, spec, tree=doc.tree)
            t3 = time.perf_counter()
            times["tree update"].append(t1 - t0)
            times["context"].append(t2 - t1)
            times["shaping"].append(t3 - t2)
        t0 = time.perf_counter()
        parse(doc.text, spec)
        times["fresh parse"].append(time.perf_counter() - t0)
        doc.replace(insert_at, cursor, "")
    return {k: _ms(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=40, help="copies of each sample in the large document")
    args = ap.parse_args()
    print("| file | lines | fresh parse p50 | tree update p50 / p95 | context p50 / p95 | shaping p50 / p95 |")
    print("|---|---|---|---|---|---|")
    for path in SAMPLES:
        spec = language_for(str(path))
        text = path.read_text(encoding="utf-8")
        for label, doc in ((path.name, text), (f"{path.name} x{args.scale}", text * args.scale)):
            r = bench(doc, spec)
            print(
                f"| {label} | {doc.count(chr(10))} | {r['fresh parse'][0]:.2f} ms "
                f"| {r['tree update'][0]:.2f} / {r['tree update'][1]:.2f} ms "
                f"| {r['context'][0]:.2f} / {r['context'][1]:.2f} ms "
                f"| {r['shaping'][0]:.2f} / {r['shaping'][1]:.2f} ms |"
            )


if __name__ == "__main__":
    main()
