"""Next-edit suggestions on real edit sequences (issue 14): proposal rate, exact match,
location hit, false proposals and latency, per kind of edit, side by side.

Cases (benchmarks/next_edit_cases.py): mechanical multi-site edits on this interpreter's
standard library, one site at a time (rename a parameter / a local / a function, add a
parameter), one-site edits that need no follow-up (swap_call: one call made a call of another
function, whose old name must not be "renamed" elsewhere), and pairs of hunks of one file in one commit of a git history (`--history`,
this repository's own by default). Each step is what the server sees after a didChange;
the request goes through the server's own planning (`dllm_lsp.server.next_edit.pipeline`:
tree-sitter region, renamed uses, windowing) and filters (`filters.drop_reason`), to the
in-process engine's `next_edit`. Systems, in the same run:
- `<model>:chosen`: the product (the spans the engine chooses);
- `<model>:whole_region`: the baseline that re-masks every line of the region but the edited ones;
- `find_replace`: model-free, renames only: the old name replaced by the new one in the region.

Metrics per kind (steps that need a follow-up unless said): proposal = a proposal was shown;
exact = the proposed document equals the next true state (the next site done) or all
remaining sites of the request's region done; hit = a proposed span overlaps a remaining site;
false = a proposal shown on a step that needs no follow-up (after the last site; every
swap_call step);
the threshold is the server's `nextEdit.minConfidence` unless `--min-confidence` says, chosen
by benchmarks/calibrate_next_edit.py on other modules' cases (never on these);
latency = planning + engine + filters, p50/p95, in ms (what follows the debounce).

    .venv/bin/python benchmarks/bench_next_edit.py --quick [--models small] [--write]
    .venv/bin/python benchmarks/bench_next_edit.py --models default,small --write
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "engine", ROOT / "kernels", ROOT / "benchmarks"):
    sys.path.insert(0, str(p))

from _lsp_wire import rss_kb  # noqa: E402
from dllm_engine.heap_trim import MIN_INTERVAL_S  # noqa: E402  (torch-free)
from next_edit_cases import Step, history_cases, mechanical_cases, steps_of  # noqa: E402

RENAMES = ("rename_param", "rename_local", "rename_function", "swap_call")  # what find-and-replace can be asked


def _proposal(system: str, engine, step: Step, history, spec, min_confidence: float, max_lines: int,
              whole_region_passes: int):
    """(replacements shown, or [] when none; elapsed ms; the region's str range in `step.after`)."""
    raw, shown, ms, region = proposal_at(system, engine, step, history, spec, max_lines, whole_region_passes)
    return shown(min_confidence), ms, region


def proposal_at(system: str, engine, step: Step, history, spec, max_lines: int, whole_region_passes: int):
    """(the engine's replacements before the confidence threshold, `shown(threshold)` -> the
    replacements the server would show at that threshold, elapsed ms at the bench's threshold
    path, the region's str range): one engine call, any number of thresholds (calibration)."""
    from dllm_engine.protocol import DiffusionParams
    from dllm_lsp.server.next_edit.filters import Replacement, confident, drop_reason
    from dllm_lsp.server.next_edit.pipeline import plan_request, replacements_of
    from dllm_lsp.syntax.languages import parse

    t0 = time.perf_counter()
    text = step.after
    tree = parse(text, spec)  # the server keeps this tree incrementally; a parse here is a cost it does not pay
    t_parse = time.perf_counter() - t0
    mode = "whole_region" if system.endswith("whole_region") else "chosen"
    # The whole-region baseline denoises hundreds of slots: its passes are capped (the last pass
    # commits what is left), or one step takes minutes on this CPU.
    params = DiffusionParams(max_passes=whole_region_passes) if mode == "whole_region" else DiffusionParams()
    planned = plan_request(text, tree, spec, history.recent("doc"), None, max_lines, params, mode=mode)
    if planned is None:
        return [], lambda threshold: [], (time.perf_counter() - t0 - t_parse) * 1000, (0, 0)
    request, base, last, removed = planned
    lines = request.document.splitlines(keepends=True)
    region = (base + sum(len(x) for x in lines[:request.region_start_line]),
              base + sum(len(x) for x in lines[:request.region_end_line]))
    if system == "find_replace":
        lo = base + sum(len(x) for x in request.document.splitlines(keepends=True)[:request.region_start_line])
        hi = base + sum(len(x) for x in request.document.splitlines(keepends=True)[:request.region_end_line])
        new = text[last.offset:last.offset + len(last.inserted)] if last else ""
        new_word = next(iter(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _word_at(text, last.offset))), "") if last else ""
        reps = [Replacement(m.start(), m.end(), new_word, 1.0) for w in sorted(removed)
                for m in re.finditer(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", text[:hi])
                if m.start() >= lo and not (last.offset <= m.start() < last.offset + max(1, len(new)))] if new_word else []
        raw = reps
    else:
        raw = replacements_of(engine.next_edit(request), base)
    before_last = history.text_before_last("doc")

    def shown(threshold: float) -> list:
        floor = 0.0 if system == "find_replace" else threshold
        reps = confident(raw, floor)
        return [] if drop_reason(text, reps, last, before_last, removed, spec, floor, set()) else reps

    shown(0.3)  # the filters' cost is part of the latency
    elapsed = (time.perf_counter() - t0 - t_parse) * 1000
    return raw, shown, elapsed, region


def _word_at(text: str, offset: int) -> str:
    lo = offset
    while lo > 0 and (text[lo - 1].isalnum() or text[lo - 1] == "_"):
        lo -= 1
    hi = offset
    while hi < len(text) and (text[hi].isalnum() or text[hi] == "_"):
        hi += 1
    return text[lo:hi]


def score_step(step: Step, reps, region: tuple[int, int]) -> dict:
    from dllm_lsp.server.next_edit.filters import apply

    out = {"proposed": bool(reps), "exact": False, "hit": False}
    if not reps:
        return out
    new_doc = apply(step.after, reps)
    nxt = step.remaining[0]
    one = step.after[:nxt.start] + nxt.new + step.after[nxt.end:]
    # The remaining sites of the request's region (the seventh session took those within 400
    # characters of the proposal, which could count a proposal that skips the next site as exact).
    inside = [s for s in step.remaining if region[0] <= s.start and s.end <= region[1]]
    everything = apply(step.after, [type(reps[0])(s.start, s.end, s.new, 1.0) for s in inside]) if inside else None
    out["exact"] = new_doc in (one, everything)
    out["hit"] = any((r.start < s.end and r.end > s.start) or (s.start == s.end and r.start <= s.start <= r.end)
                     for r in reps for s in step.remaining)
    return out


def _pct(xs) -> str:
    return f"{100 * sum(xs) / len(xs):.0f}%" if xs else "-"


def _ms(xs, q: float) -> str:
    if not xs:
        return "-"
    xs = sorted(xs)
    return f"{xs[min(len(xs) - 1, int(q * len(xs)))]:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="small", help="comma-separated: default, small, or a checkpoint")
    ap.add_argument("--quick", action="store_true", help="few cases: a few minutes on the small model")
    ap.add_argument("--per-kind", type=int, default=None)
    ap.add_argument("--history", default="/work/main", help="a git repository whose history gives hunk pairs")
    ap.add_argument("--history-pairs", type=int, default=None)
    ap.add_argument("--no-whole-region", action="store_true", help="skip the whole-region baseline (slow)")
    ap.add_argument("--whole-region-cases", type=int, default=None,
                    help="run the whole-region baseline on this many cases per kind (default: 1 with --quick, 3)")
    ap.add_argument("--whole-region-passes", type=int, default=None,
                    help="pass cap of the whole-region baseline (default: 16 with --quick, 48)")
    ap.add_argument("--max-lines", type=int, default=None, help="the region cap (default: the server's nextEdit.maxLines)")
    ap.add_argument("--min-confidence", type=float, default=None,
                    help="the threshold (default: the server's nextEdit.minConfidence)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--verbose", action="store_true", help="one line per step on stderr")
    ap.add_argument("--malloc", choices=("server", "glibc"), default="server",
                    help="server (default): glibc's malloc as `dllm-lsp serve` and the daemon set it "
                         "(dllm_lsp/malloc_arenas.py: two arenas, a fixed mmap threshold); glibc: as it comes")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the model systems' steps this many times (resident memory after each on stderr)")
    ap.add_argument("--write", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = ap.parse_args()
    if args.malloc == "server":  # before any worker thread, as the server does at start
        from dllm_lsp.malloc_arenas import tune_malloc

        tune_malloc()
    per_kind = args.per_kind or (3 if args.quick else 10)
    from dllm_lsp.server.options import NextEditOptions

    served = NextEditOptions()  # what the server shows is what is measured, unless told otherwise
    args.min_confidence = served.min_confidence if args.min_confidence is None else args.min_confidence
    args.max_lines = served.max_lines if args.max_lines is None else args.max_lines
    if args.whole_region_passes is None:
        args.whole_region_passes = 16 if args.quick else 48
    if args.whole_region_cases is None:
        args.whole_region_cases = 1 if args.quick else 3
    pairs = args.history_pairs if args.history_pairs is not None else (4 if args.quick else 16)

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_lsp.syntax.languages import language_named

    spec = language_named("python")
    cases = mechanical_cases(per_kind)
    if pairs and Path(args.history, ".git").exists():
        cases += history_cases(Path(args.history), pairs)
    steps_by_case = [steps_of(c) for c in cases]
    n_steps = sum(len(s) for s in steps_by_case)
    print(f"{len(cases)} cases, {n_steps} steps", file=sys.stderr)

    systems: list[tuple[str, object]] = []
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for model in args.models.split(","):
        engine = Engine(EngineConfig(model=model, threads=args.threads))
        names = [f"{model}:chosen"] + ([] if args.no_whole_region else [f"{model}:whole_region"])
        for rep in range(args.repeat):
            for name in names:
                # The whole-region baseline costs minutes a case on a CPU: on the first cases of each kind only.
                limit = args.whole_region_cases if name.endswith("whole_region") else None
                _run(name, engine, steps_by_case, spec, args, rows, per_kind=limit)
            if args.repeat > 1:
                # At rest long enough for the engine's idle heap trim, as a server between bursts of edits.
                time.sleep(MIN_INTERVAL_S + 1.5)
                print(f"{model}: after round {rep + 1} of {args.repeat}: RSS {rss_kb(os.getpid()) / 1024:.1f} MB",
                      file=sys.stderr, flush=True)
        engine.shutdown()
        systems += [(n, None) for n in names]
    _run("find_replace", None, steps_by_case, spec, args, rows, kinds=RENAMES)
    systems.append(("find_replace", None))

    kinds = list(dict.fromkeys(s.kind for steps in steps_by_case for s in steps))
    lines = [f"Cases: {len(cases)} ({', '.join(f'{k} {sum(1 for c in cases if c.kind == k)}' for k in kinds)}), "
             f"{n_steps} steps; history pairs from `{args.history}` (this repository's git history). "
             f"Region cap {args.max_lines} lines, minConfidence {args.min_confidence}, malloc {args.malloc}. "
             "Rates over steps that need a follow-up; false = proposals on steps that need none. "
             f"The whole-region baseline runs on the first {args.whole_region_cases} case(s) of each kind only, "
             f"its passes capped at {args.whole_region_passes}.", "",
             "| system | kind | steps | proposal | exact | hit | false | p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, _ in systems:
        for kind in kinds:
            rs = rows.get((name, kind))
            if not rs:
                continue
            need = [r for r in rs if r["follow_up"]]
            none = [r for r in rs if not r["follow_up"]]
            ms = [r["ms"] for r in rs]
            lines.append(f"| {name} | {kind} | {len(rs)} | {_pct([r['proposed'] for r in need])} | "
                         f"{_pct([r['exact'] for r in need])} | {_pct([r['hit'] for r in need])} | "
                         f"{_pct([r['proposed'] for r in none])} | {_ms(ms, 0.5)} | {_ms(ms, 0.95)} |")
    from _bench_common import emit, section

    emit(section("Next-edit suggestions (issue 14)", "cpu", lines), str(ROOT / "benchmarks/RESULTS.md") if args.write else None)


def _run(name, engine, steps_by_case, spec, args, rows, kinds=None, per_kind=None) -> None:
    from dllm_lsp.server.next_edit.history import EditHistory

    t0 = time.perf_counter()
    taken: dict[str, int] = defaultdict(int)
    for steps in steps_by_case:
        if kinds is not None and steps[0].kind not in kinds:
            continue
        if per_kind is not None and taken[steps[0].kind] >= per_kind:
            continue
        taken[steps[0].kind] += 1
        history = EditHistory()  # the server's: one didChange per site, coalesced as it would
        for step in steps:
            history.record("doc", step.before, step.after)
            reps, ms, region = _proposal(name, engine, step, history, spec, args.min_confidence, args.max_lines,
                                         args.whole_region_passes)
            row = score_step(step, reps, region) if step.follow_up else {"proposed": bool(reps), "exact": False, "hit": False}
            rows[(name, step.kind)].append({**row, "follow_up": step.follow_up, "ms": ms})
            if args.verbose:
                print(f"{name} {step.kind} {step.source} follow_up={step.follow_up} {row} {ms:.0f} ms "
                      f"{[(step.after[r.start:r.end], r.new) for r in reps][:3]}", file=sys.stderr, flush=True)
    print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
