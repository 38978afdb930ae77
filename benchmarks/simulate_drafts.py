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
  verifies one branch today, so this is what a second branch would buy);
- trees under a row budget: branches (lookup's continuations of every earlier occurrence,
  the store's most frequent continuations) merged into a trie of at most B tokens, each a
  row of the pass. With `--row-costs` (bench_pass_rows.py's JSON line) each rule also gets an
  estimated time per fill: its passes, each priced by the rows it ran.

    python benchmarks/simulate_drafts.py runs/draft/shipped.json [--benchmark single-line]
    python benchmarks/simulate_drafts.py runs/draft/s5.json --row-costs runs/draft/rows.json

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

CONTINUATION = 8
MIX = 1_000_003  # n-gram hashing (collisions only make a draft wrong, never a count)
ORDERS = (6, 4, 3, 2, 1)  # n-gram lengths the store keys, longest tried first
TOP = 4  # continuations kept per n-gram


def ngram_keys(tokens: np.ndarray, n: int, count: int) -> np.ndarray:
    key = np.zeros(count, dtype=np.int64)
    for j in range(n):
        key = key * MIX + tokens[j:j + count]  # int64 arithmetic wraps
    return key


def ngram_key(tokens: list[int]) -> int:
    """ngram_keys' value for one n-gram, wrapped to int64 as numpy wraps it (a Python int
    past 2**63 never equals a stored key: the earlier script never matched its 4-grams)."""
    key = 0
    for t in tokens:
        key = (key * MIX + int(t) + 2**63) % 2**64 - 2**63
    return key


class Store:
    """Per n in ORDERS: the TOP most frequent continuations of each n-gram in a token stream."""

    def __init__(self, tokens: np.ndarray) -> None:
        self.tables = {}
        for n in ORDERS:
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
            key_sorted = k[starts][by_count]
            first = np.r_[True, key_sorted[1:] != key_sorted[:-1]]
            index = np.arange(len(by_count))
            rank = index - np.maximum.accumulate(np.where(first, index, 0))
            keep = rank < TOP
            self.tables[n] = (key_sorted[keep], conts[order[starts[by_count[keep]]]])

    def drafts(self, history: list[int], length: int, top: int = 1) -> list[list[int]]:
        """The `top` most frequent continuations of the longest n-gram ending `history` the store has."""
        for n in ORDERS:
            if len(history) < n:
                continue
            key = ngram_key(history[-n:])
            keys, conts = self.tables[n]
            i = int(np.searchsorted(keys, key))
            found = []
            while i < len(keys) and keys[i] == key and len(found) < top:
                found.append(conts[i][:length].tolist())
                i += 1
            if found:
                return found
        return []

    def draft(self, history: list[int], length: int) -> list[int]:
        found = self.drafts(history, length)
        return found[0] if found else []


def lookup_branches(history: list[int], length: int, top: int) -> list[list[int]]:
    """Up to `top` distinct continuations of the longest trailing 1-3-gram's earlier
    occurrences in the text, latest first (drafting.lookup_draft's first, then older ones)."""
    h = torch.tensor(history)
    total = h.numel()
    for n in range(min(3, total - 1), 0, -1):
        windows = h[: total - 1].unfold(0, n, 1)
        hits = (windows == h[total - n:]).all(-1).nonzero().squeeze(-1).tolist()
        found: list[list[int]] = []
        for start in reversed(hits):
            d = h[start + n:start + n + length].tolist()
            if d and d not in found:
                found.append(d)
            if len(found) >= top:
                break
        if found:
            return found
    return []


def trie(branches: list[list[int]], budget: int) -> tuple[list[list[int]], int]:
    """The branches, in priority order, merged into a trie of at most `budget` tokens (rows):
    (the paths kept, the rows they take)."""
    nodes: set[tuple[int, ...]] = set()
    kept = []
    for branch in branches:
        path: list[int] = []
        for t in branch:
            if tuple(path + [t]) not in nodes:
                if len(nodes) >= budget:
                    break
                nodes.add(tuple(path + [t]))
            path.append(t)
        if path:
            kept.append(path)
    return kept, len(nodes)


def count_passes(cases, rule, budget: int | None = None, row_ms: dict[int, float] | None = None):
    """(passes per fill, fill tokens per pass, estimated ms per fill or None). Each pass keeps
    the longest run of a branch that matches the fill, plus the model's own token; with a
    `budget` the branches are cut to a trie of that many rows first."""
    passes = tokens = 0
    ms = 0.0
    for history, fill in cases:
        k = 0
        while k < len(fill):
            branches = rule(history + fill[:k])
            rows = sum(map(len, branches))
            if budget is not None:
                branches, rows = trie(branches, budget)
            best = 0
            for d in branches:
                m = 0
                while m < len(d) and k + m < len(fill) and d[m] == fill[k + m]:
                    m += 1
                best = max(best, m)
            k += best + 1
            passes += 1
            if row_ms:
                ms += row_ms[min(1 + rows, max(row_ms))]  # the held-out token's row and one per draft token
        tokens += len(fill)
    return passes / len(cases), tokens / passes, (ms / len(cases) if row_ms else None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval_json", type=Path)
    ap.add_argument("--benchmark", default="single-line")
    ap.add_argument("--model", default="default")
    ap.add_argument("--row-costs", type=Path, help="bench_pass_rows.py's output: its first line, JSON")
    args = ap.parse_args()
    from dllm_engine.checkpoint import load

    row_ms = None
    if args.row_costs:
        measured = json.loads(args.row_costs.read_text().splitlines()[0])
        row_ms = {int(r): float(v) for r, v in measured["median_ms_by_rows"].items()}
        for r in range(1, max(row_ms) + 1):  # rows between two measured counts: the next measured one's price
            row_ms.setdefault(r, row_ms[min(x for x in row_ms if x >= r)])
    tokenizer = load(args.model, dtype=torch.float32).tokenizer
    run = json.loads(args.eval_json.read_text())
    tasks = {t.task_id: t for t in load_humaneval(args.benchmark)}
    outcomes = [o for o in run["outcomes"] if o["task_id"] in tasks and o["passes"] > 0]
    cases = [(tokenizer.encode(tasks[o["task_id"]].suffix) + [0] + tokenizer.encode(tasks[o["task_id"]].prefix),
              tokenizer.encode(o["fill"])) for o in outcomes]
    t0 = time.perf_counter()
    texts = [p.read_text(encoding="utf-8") for p in collect(default_roots())[0]]
    store = Store(np.concatenate([np.array(tokenizer.encode(t) + [0], dtype=np.int64) for t in texts]))
    print(f"{len(cases)} fills of {args.eval_json}; engine's passes per fill {np.mean([o['passes'] for o in outcomes]):.2f}; "
          f"store of {len(texts)} standard-library files built in {time.perf_counter() - t0:.0f} s")

    def lookup(length):
        return lambda h: [lookup_draft(torch.tensor(h), length).tolist()]

    def tree(h):  # every lookup continuation first (the text's own), then the store's
        return lookup_branches(h, CONTINUATION, 3) + store.drafts(h, CONTINUATION, 3)

    rules = {
        "none": (lambda h: [], None),
        "lookup, 3 tokens (the engine's rule)": (lookup(3), None),
        "lookup, 5 tokens": (lookup(5), None),
        "store, 3 tokens": (lambda h: [store.draft(h, 3)], None),
        "lookup, else store (one branch, 3 tokens)": (
            lambda h: [lookup_draft(torch.tensor(h), 3).tolist() or store.draft(h, 3)], None),
        "lookup + store (two branches, 3 tokens each)": (
            lambda h: [lookup_draft(torch.tensor(h), 3).tolist(), store.draft(h, 3)], None),
        **{f"tree of 3 lookup + 3 store branches, at most {b} rows": (tree, b) for b in (3, 5, 8, 16, 32)},
    }
    print("| draft rule | passes per fill | fill tokens per pass | estimated ms per fill |\n|---|---|---|---|")
    for name, (rule, budget) in rules.items():
        p, t, ms = count_passes(cases, rule, budget if budget is not None else 10**6, row_ms)
        print(f"| {name} | {p:.2f} | {t:.2f} | {'-' if ms is None else f'{ms:.0f}'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
