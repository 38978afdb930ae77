"""Best of N as the editor gets it: the engine's fill (the best read) against the fill the
server and `dllm-lsp infill` offer, the first of the engine's fills (best read first) that
leaves the file with the fewest syntax errors (dllm_lsp/syntax/fill_choice.py). Paired, on the
same engine results.

    python benchmarks/bench_fill_choice.py --benchmark humaneval --stride 1 --n 2 --out A.json \
        [--offset 0 --every 2]     # HumanEval single-line: pass@1 of each (tests run)
    python benchmarks/bench_fill_choice.py --benchmark heldout --heldout-dir DIR --n 2 --out B.json
                                   # one-line holes cut from DIR's Python: exact match, syntax ok
    python benchmarks/bench_fill_choice.py --benchmark multi-line --stride 20 --n 2 --out C.json
                                   # multi-line / random-span: variable length (the end chosen), 128 tokens
Fills do not depend on load: two processes (`--offset 0/1 --every 2`) may run side by side.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.evaluation import execution
from dllm_engine.evaluation.harness import ContextTrimmer
from dllm_engine.evaluation.tasks import cut_heldout, folder_sources, load_humaneval
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest
from dllm_lsp.syntax.fill_choice import Original, fewest_errors
from dllm_lsp.syntax.languages import language_named, parse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", choices=("humaneval", "multi-line", "random-span", "heldout"), default="humaneval",
                    help="humaneval: single-line, line mode; multi-line, random-span: variable length")
    ap.add_argument("--stride", type=int, default=5, help="HumanEval tasks[::stride]")
    ap.add_argument("--heldout-dir", type=Path, default=Path("dllm_lsp"))
    ap.add_argument("--heldout-count", type=int, default=600, help="holes cut (a third are one line)")
    ap.add_argument("--n", type=int, default=2, help="best of N")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    py = language_named("python")
    engine = Engine(EngineConfig(model="default", threads=a.threads))
    trim = ContextTrimmer(engine.tokenizer, 1024)
    line_mode = a.benchmark in ("humaneval", "heldout")
    if a.benchmark == "humaneval":
        tasks = load_humaneval("single-line", stride=a.stride)
    elif a.benchmark != "heldout":
        tasks = load_humaneval(a.benchmark, stride=a.stride)
    else:
        tasks = [t for t in cut_heldout(folder_sources(a.heldout_dir), a.heldout_count) if t.benchmark == "heldout-line"]
    tasks = tasks[a.offset::a.every]
    rows = []
    try:
        for k, t in enumerate(tasks):
            prefix, suffix = trim(t.prefix, t.suffix)
            hole = (Hole(prefix=prefix, suffix=suffix, max_tokens=64, stop=("\n",)) if line_mode
                    else Hole(prefix=prefix, suffix=suffix, max_tokens=128))
            r = engine.infill(InfillRequest(holes=[hole], params=DiffusionParams(candidates=a.n))).holes[0]
            fills = [r.text] + list(r.alternatives or [])
            # line mode: a whole line, as the editor inserts it; a variable-length fill as it is
            lines = [f + "\n" if f.strip() else "" for f in fills] if line_mode else fills
            # As the server chooses: each filled file parsed from the file's tree, the hole empty.
            original = Original(t.prefix + t.suffix, parse(t.prefix + t.suffix, py))
            j = fewest_errors([t.prefix + line + t.suffix for line in lines], py, original,
                              [(len(t.prefix), len(t.prefix) + len(line)) for line in lines])
            row = dict(task=t.task_id, engine=fills[0], chosen=fills[j], fills=len(fills))
            if t.executable:
                res = execution.run_programs([t.program(lines[0]), t.program(lines[j])], 10.0, 1)
                row.update(engine_passed=res[0].passed, chosen_passed=res[1].passed)
            else:
                ok = execution.syntax_ok([t.prefix + lines[0] + t.suffix, t.prefix + lines[j] + t.suffix,
                                          t.prefix + t.middle + t.suffix])
                row.update(engine_exact=fills[0].strip() == t.middle.strip(), chosen_exact=fills[j].strip() == t.middle.strip(),
                           engine_syntax=ok[0] or not ok[2], chosen_syntax=ok[1] or not ok[2])
            rows.append(row)
            if k % 20 == 0:
                print(k, len(tasks), flush=True)
                Path(a.out).write_text(json.dumps(rows))
    finally:
        Path(a.out).write_text(json.dumps(rows))
        engine.shutdown()
    for key in ("passed", "exact", "syntax"):
        if rows and "engine_" + key in rows[0]:
            e, c = (sum(r[side + key] for r in rows) for side in ("engine_", "chosen_"))
            won = sum(r["chosen_" + key] and not r["engine_" + key] for r in rows)
            lost = sum(r["engine_" + key] and not r["chosen_" + key] for r in rows)
            print(f"best of {a.n}, {key}: engine {e}/{len(rows)}, fewest syntax errors {c}/{len(rows)} ({won} won / {lost} lost)")
    print("fills changed:", sum(r["engine"] != r["chosen"] for r in rows), "of", len(rows))


if __name__ == "__main__":
    main()
