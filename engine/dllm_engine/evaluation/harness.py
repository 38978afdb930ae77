"""Drive an engine over evaluation tasks under several decoding arms, then score the fills.

An arm is one decoding setting: the hole length either left to the engine
(variable: smallest bucket, grows as needed, pads end the fill) or given
(oracle: canvas = max_tokens = the reference fill's token count), and either
one token per pass (threshold >= 1.0) or threshold decoding. The `empty` arm
fills nothing: the floor a benchmark gives for free. Line-mode arms decode as
the language server does for a single-line completion: the fill stops at its
first newline (a stop string) and is one whole line; they run only on the
benchmarks whose holes are single lines.

Any `dllm_engine.clients.EngineClient` can be evaluated (in-process engine,
daemon, OpenAI-compatible FIM endpoint). Fills are scored afterwards in
subprocesses (execution.py); nothing generated is ever run in this process.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..protocol import DiffusionParams, Hole, InfillRequest
from . import execution
from .tasks import Task


@dataclass(frozen=True)
class Arm:
    name: str
    oracle_length: bool = False
    threshold: float = 0.9
    empty: bool = False
    line: bool = False  # stop at the first newline, as the server's single-line completions do
    canvas_cache: str = "exact"  # DiffusionParams.canvas_cache
    prefix_only: bool = False  # the suffix dropped: what the model gives without the code after the hole
    candidates: int = 1  # best of N (DiffusionParams.candidates)


LINE_BENCHMARKS = ("single-line", "heldout-line")


def default_arms(threshold: float = 0.9, canvas_cache: str = "exact") -> list[Arm]:
    """The floor, then variable / oracle / line mode, each at `threshold` and at one token per pass
    (the order ARM_KEYS indexes)."""
    tag = "" if canvas_cache == "exact" else f", {canvas_cache} canvas cache"
    arms = [Arm("empty fill (floor)", empty=True)]
    for label, oracle, line in (("variable length", False, False), ("oracle length", True, False),
                                ("line mode", False, True)):
        for thr, decoding in ((threshold, f"threshold {threshold}"), (1.0, "1 token/pass")):
            arms.append(Arm(f"{label}, {decoding}{tag}", oracle, thr, line=line, canvas_cache=canvas_cache))
    # The reference point of a left-to-right model that never sees the suffix (for a base in
    # blocks of 1 this is the base's own autoregressive decoding of the prefix).
    arms.append(Arm(f"line mode, prefix only, threshold {threshold}{tag}", False, threshold, line=True,
                    canvas_cache=canvas_cache, prefix_only=True))
    return arms


def applies(arm: Arm, task: Task) -> bool:
    return not arm.line or task.benchmark in LINE_BENCHMARKS


@dataclass
class Outcome:
    task_id: str
    benchmark: str
    arm: str
    fill: str
    passes: int = 0
    tokens: int = 0
    committed: int = 0  # tokens committed over all passes (pads included when the engine reports them)
    latency_ms: float = 0.0
    finish_reason: str = ""
    exact: bool = False
    passed: bool | None = None  # None: the task has no tests
    syntax_ok: bool | None = None


class ContextTrimmer:
    """Cuts prefix/suffix to the token window the model was trained on (3/4 to the prefix by default)."""

    def __init__(self, tokenizer, budget: int | None) -> None:
        self.tok, self.budget = tokenizer, budget

    def count(self, text: str) -> int:
        return len(self.tok.encode(text)) if self.tok else max(1, len(text) // 3)

    def __call__(self, prefix: str, suffix: str) -> tuple[str, str]:
        if not self.budget or self.tok is None:
            return prefix, suffix
        pre, suf = self.tok.encode(prefix), self.tok.encode(suffix)
        room = self.budget - 2  # the <suf> and <pre> markers
        take_suf = min(len(suf), room // 4)
        take_pre = min(len(pre), room - take_suf)
        take_suf = min(len(suf), room - take_pre)
        prefix = prefix if take_pre == len(pre) else self.tok.decode(pre[len(pre) - take_pre:])
        suffix = suffix if take_suf == len(suf) else self.tok.decode(suf[:take_suf])
        return prefix, suffix


async def fill_one(client, task: Task, arm: Arm, trim: ContextTrimmer, max_tokens: int) -> Outcome:
    if arm.empty:
        return Outcome(task.task_id, task.benchmark, arm.name, fill="")
    prefix, suffix = trim(task.prefix, "" if arm.prefix_only else task.suffix)
    if arm.oracle_length:
        n = max(1, min(1024, trim.count(task.middle)))
        hole = Hole(prefix=prefix, suffix=suffix, max_tokens=n, bucket=n)
    else:
        hole = Hole(prefix=prefix, suffix=suffix, max_tokens=max_tokens, stop=("\n",) if arm.line else ())
    request = InfillRequest(holes=[hole], params=DiffusionParams(threshold=arm.threshold, canvas_cache=arm.canvas_cache,
                                                                 candidates=arm.candidates),
                            priority="batch")
    t0 = time.perf_counter()
    result = await client.infill(request)
    latency = (time.perf_counter() - t0) * 1000
    h = result.holes[0]
    committed = sum(h.committed_per_pass) if h.committed_per_pass else h.tokens
    fill = h.text
    if arm.line:  # one whole line, as the editor inserts it before the line break
        fill = fill + "\n" if fill.strip() else ""
    return Outcome(task.task_id, task.benchmark, arm.name, fill=fill, passes=h.passes, tokens=h.tokens,
                   committed=committed, latency_ms=latency, finish_reason=h.finish_reason)


def score(tasks: list[Task], outcomes: list[Outcome], timeout_s: float, workers: int | None) -> None:
    """Fill in exact / passed / syntax_ok on every outcome (in place)."""
    by_id = {t.task_id + "\0" + t.benchmark: t for t in tasks}
    runnable, checkable = [], []
    for o in outcomes:
        task = by_id[o.task_id + "\0" + o.benchmark]
        o.exact = o.fill.strip() == task.middle.strip()
        (runnable if task.executable else checkable).append((o, task))
    results = execution.run_programs([t.program(o.fill) for o, t in runnable], timeout_s, workers)
    for (o, _), r in zip(runnable, results):
        o.passed, o.syntax_ok = r.passed, r.syntax_ok
    # held-out files: "no new syntax errors" = the filled file parses, or the original did not either
    filled = execution.syntax_ok([t.program(o.fill) for o, t in checkable])
    originals = execution.syntax_ok([t.program(t.middle) for _, t in checkable])
    for (o, _), ok, orig_ok in zip(checkable, filled, originals):
        o.syntax_ok = ok or not orig_ok


async def evaluate(client, tasks: list[Task], arms: list[Arm], trim: ContextTrimmer,
                   max_tokens: dict[str, int], timeout_s: float = 10.0, workers: int | None = None,
                   progress=None) -> list[Outcome]:
    outcomes = []
    model_arms = [a for a in arms if not a.empty]
    if tasks and model_arms:  # load the model and warm caches outside the timed requests
        await fill_one(client, tasks[0], model_arms[0], trim, 8)
    for arm in arms:
        for i, task in enumerate(tasks):
            if not applies(arm, task):
                continue
            outcomes.append(await fill_one(client, task, arm, trim, max_tokens.get(task.benchmark, 64)))
            if progress:
                progress(arm, i + 1, len(tasks))
    score(tasks, outcomes, timeout_s, workers)
    return outcomes


def outcome_dicts(outcomes: list[Outcome]) -> list[dict]:
    return [asdict(o) for o in outcomes]
