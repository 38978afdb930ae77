"""How many passes would the same greedy fills take under other draft rules? (offline)

Greedy decoding with drafting commits exactly the tokens one-token-per-pass decoding
would; only the number of passes depends on the drafts. So, given the fills an
evaluation run wrote (`dllm-lsp eval ... --json-out`), the passes any draft rule would
need can be counted without running the model: each pass keeps the longest run of a
candidate draft that matches the fill, plus one token. This compares rules in seconds
instead of evaluation runs:
- `lookup`: the engine's rule (drafting.lookup_draft: what followed the latest earlier
  occurrence of the fill's last 1-3 tokens in context + fill), 3 or 5 tokens;
- `store`: the most frequent continuation of the last 1-4 tokens in a table of the
  standard library's tokens (the training manifest's files: never HumanEval);
- `lookup+store`: both as two branches of one pass (a tree of drafts; the engine
  verifies one branch today, so this is what a second branch would buy).

    python benchmarks/simulate_drafts.py runs/draft/shipped.json [--benchmark single-line]

The context is re-tokenized as the layout reads it (suffix, a marker, prefix): within a
pass or two of the engine's own count for the shipped rule (it prints both).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "kernels")]

from dllm_engine.drafting import lookup_draft  # noqa: E402
from dllm_engine.evaluation.tasks import load_humaneval  # noqa: E402
from dllm_engine.training.corpus import collect, default_roots  # noqa: E402

CONTINUATION = 6
MIX = 1_000_003  # n-gram hashing (collisions only make a draft wrong, never a count)


def ngram_keys(tokens: np.ndarray, n: int, count: int) -> np.ndarray:
    key = np.zeros(count, dtype=np.int64)
    for j in range(n):
        key = key * MIX + tokens[j:j + count]
    return key


class Store:
    """Per n (1-4): the most frequent continuation of each n-gram in a token stream."""

    def __init__(self, tokens: np.ndarray) -> None:
        self.tables = {}
        for n in (4, 3, 2, 1):
            count = len(tokens) - n - CONTINUATION
            keys = ngram_keys(tokens, n, count)
            conts = np.stack([tokens[n + j:n + j + count] for j in range(CONTINUATION)], 1)
            ch = np.zeros(count, dtype=np.int64)
            for j in range(CONTINUATION):
                ch = ch * MIX + conts[:, j]
            order = np.lexsort((ch, keys))
            k, c = keys[order], ch[order]
            starts = np.r_[0, np.nonzero((k[1:] != k[:-1]) | (c[1:] != c[:-1]))[0] + 1]
            runs = np.diff(np.r_[starts, count])
            by_count = np.lexsort((-runs, k[starts]))  # per key, its most frequent run first
            first = np.r_[True, k[starts][by_count][1:] != k[starts][by_count][:-1]]
            best = starts[by_count[first]]
            self.tables[n] = (k[best], conts[order[best]])

    def draft(self, history: list[int], length: int) -> list[int]:
        for n in (4, 3, 2, 1):
            if len(history) < n:
                continue
            key = 0
            for t in history[-n:]:
                key = key * MIX + int(t)
            keys, conts = self.tables[n]
            i = int(np.searchsorted(keys, key))
            if i < len(keys) and keys[i] == key:
                return conts[i][:length].tolist()
        return []


def count_passes(cases, rule) -> tuple[float, float]:
    passes = tokens = 0
    for history, fill in cases:
        k = 0
        while k < len(fill):
            best = 0
            for d in rule(history + fill[:k]):
                m = 0
                while m < len(d) and k + m < len(fill) and d[m] == fill[k + m]:
                    m += 1
                best = max(best, m)
            k += best + 1
            passes += 1
        tokens += len(fill)
    return passes / len(cases), tokens / passes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval_json", type=Path)
    ap.add_argument("--benchmark", default="single-line")
    ap.add_argument("--model", default="default")
    args = ap.parse_args()
    from dllm_engine.checkpoint import load

    tokenizer = load(args.model, dtype=torch.float32).tokenizer
    run = json.loads(args.eval_json.read_text())
    tasks = {t.task_id: t for t in load_humaneval(args.benchmark)}
    outcomes = [o for o in run["outcomes"] if o["task_id"] in tasks]
    cases = [(tokenizer.encode(tasks[o["task_id"]].suffix) + [0] + tokenizer.encode(tasks[o["task_id"]].prefix),
              tokenizer.encode(o["fill"])) for o in outcomes]
    t0 = time.perf_counter()
    texts = [p.read_text(encoding="utf-8") for p in collect(default_roots())[0]]
    store = Store(np.concatenate([np.array(tokenizer.encode(t) + [0], dtype=np.int64) for t in texts]))
    print(f"{len(cases)} fills of {args.eval_json}; engine's passes per fill {np.mean([o['passes'] for o in outcomes]):.2f}; "
          f"store of {len(texts)} standard-library files built in {time.perf_counter() - t0:.0f} s")

    def lookup(length):
        return lambda h: [lookup_draft(torch.tensor(h), length).tolist()]

    rules = {
        "none": lambda h: [],
        "lookup, 3 tokens (the engine's rule)": lookup(3),
        "lookup, 5 tokens": lookup(5),
        "store, 3 tokens": lambda h: [store.draft(h, 3)],
        "lookup, else store (one branch)": lambda h: [lookup_draft(torch.tensor(h), 3).tolist() or store.draft(h, 3)],
        "lookup + store (two branches)": lambda h: [lookup_draft(torch.tensor(h), 3).tolist(), store.draft(h, 3)],
    }
    print("| draft rule | passes per fill | fill tokens per pass |\n|---|---|---|")
    for name, rule in rules.items():
        p, t = count_passes(cases, rule)
        print(f"| {name} | {p:.2f} | {t:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
