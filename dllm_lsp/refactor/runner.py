"""Holes -> engine, in batches, many files at once; each file is applied as soon as its holes are back.

Per file: plan (process pool) -> fill (one engine request per <= 64 holes, all
of the file's requests concurrently) -> build the edit and write or diff it
(a thread). Up to `files_in_flight` files are in the engine at once, so the
engine's scheduler batches holes across files too. A tqdm bar on stderr shows
files, holes and holes/s.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field

from dllm_engine.protocol import DiffusionParams, EngineBusy, Hole, InfillRequest

from dllm_lsp.refactor.apply import HoleFill, HoleOutcome, build_edit, unified_diff, write_atomic
from dllm_lsp.refactor.journal import Journal
from dllm_lsp.refactor.planner import FilePlan, Skipped, plan_file
from dllm_lsp.refactor.recipes import Recipe
from dllm_lsp.syntax.context import ContextBudget

MAX_HOLES_PER_REQUEST = 64
_BUSY_RETRIES = 20
_POOL_MIN_FILES = 16  # below this, starting planner processes costs more than parsing in a thread


@dataclass
class RunOptions:
    apply: bool = False  # write files (else only diff)
    params: DiffusionParams = field(default_factory=DiffusionParams)
    max_holes_per_request: int = MAX_HOLES_PER_REQUEST
    files_in_flight: int = 32
    jobs: int = 1  # planning processes (1: plan in a thread)
    budget: ContextBudget = field(default_factory=ContextBudget)
    progress: bool = False
    journal: Journal | None = None  # files already rewritten by this recipe are skipped


@dataclass
class FileResult:
    path: str
    status: str  # "unchanged" | "changed" (diff only) | "written" | "not-written" | "skipped"
    reason: str | None = None
    diff: str = ""
    outcomes: list[HoleOutcome] = field(default_factory=list)
    language: str | None = None


def _engine_hole(ctx) -> Hole:
    # The model was trained on LF text: CRLF files get LF context, and fills are converted back by shaping.
    # Shaping (apply.py) cuts a fill that loops: the engine ends it there (stop_repeats).
    # Its end is not chosen by reading (Hole.choose_end): reading every hole's cuts made a
    # batch of 36 fixture holes 2.0-2.3x slower with the default model (7.2-8.6 -> 16.7-17.3 s,
    # benchmarks/RESULTS.md, thirtieth session), and what it does to a refactor's fills is not
    # measured yet.
    return Hole(prefix=ctx.prefix.replace("\r\n", "\n"), suffix=ctx.suffix.replace("\r\n", "\n"),
                max_tokens=ctx.max_tokens, bucket=ctx.bucket, stop_repeats=True, choose_end=False)


async def _infill(client, request: InfillRequest):
    for attempt in range(_BUSY_RETRIES):
        try:
            return await client.infill(request)
        except EngineBusy:
            await asyncio.sleep(min(2.0, 0.05 * 2**attempt))
    return await client.infill(request)


async def fill_plan(client, plan: FilePlan, options: RunOptions, on_holes=None) -> list[HoleFill]:
    """One HoleFill per hole of ``plan``; raises the engine's error when a request fails."""
    holes = [_engine_hole(h.ctx) for h in plan.holes]
    size = max(1, options.max_holes_per_request)

    async def one(chunk: list[Hole]) -> list[HoleFill]:
        t0 = time.perf_counter()
        result = await _infill(client, InfillRequest(holes=chunk, params=options.params, priority="batch"))
        ms = (time.perf_counter() - t0) * 1000
        if on_holes:
            on_holes(len(chunk))
        return [HoleFill(r.text, r.passes, r.finish_reason, ms) for r in result.holes]

    chunks = await asyncio.gather(*(one(holes[i : i + size]) for i in range(0, len(holes), size)))
    return [fill for chunk in chunks for fill in chunk]


def _finish(plan: FilePlan, fills: list[HoleFill], apply: bool, journal: Journal | None = None) -> FileResult:
    new_text, outcomes = build_edit(plan, fills)
    if new_text == plan.text:
        return FileResult(plan.path, "unchanged", None, "", outcomes, plan.language)
    diff = unified_diff(plan, new_text)
    if not apply:
        return FileResult(plan.path, "changed", None, diff, outcomes, plan.language)
    reason = write_atomic(plan, new_text)
    if reason is not None:
        for o in outcomes:
            if o.applied:
                o.applied, o.reason = False, reason
        return FileResult(plan.path, "not-written", reason, diff, outcomes, plan.language)
    if journal is not None:
        journal.record(plan.path, new_text.encode(plan.encoding))
    return FileResult(plan.path, "written", None, diff, outcomes, plan.language)


class _Progress:
    def __init__(self, enabled: bool, files: int) -> None:
        self.bar = None
        self.files, self.done = files, 0
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=0, unit="hole", desc="holes", file=sys.stderr, dynamic_ncols=True)
            self._postfix()

    def _postfix(self) -> None:
        self.bar.set_postfix_str(f"files {self.done}/{self.files}")

    def planned(self, holes: int) -> None:
        if self.bar is not None:
            self.bar.total += holes
            self.bar.refresh()

    def filled(self, holes: int) -> None:
        if self.bar is not None:
            self.bar.update(holes)

    def file_done(self) -> None:
        self.done += 1
        if self.bar is not None:
            self._postfix()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


async def refactor_files(files: list[str], recipe: Recipe, client, options: RunOptions) -> list[FileResult]:
    """Plan, fill and apply ``files``; one FileResult per file, in input order."""
    progress = _Progress(options.progress, len(files))
    gate = asyncio.Semaphore(max(1, options.files_in_flight))
    # Plans waiting for the engine hold whole files in memory: plan only a few files ahead of it.
    ahead = asyncio.Semaphore(max(1, options.files_in_flight) * 2 + max(1, options.jobs))
    pool: Executor | None = None
    if options.jobs > 1 and len(files) >= _POOL_MIN_FILES:
        # spawn, not fork: the engine may already own threads (torch) in this process.
        pool = ProcessPoolExecutor(min(options.jobs, len(files)), mp_context=multiprocessing.get_context("spawn"))
    loop = asyncio.get_running_loop()

    async def one(path: str) -> FileResult:
        async with ahead:
            return await _one(path)

    async def _one(path: str) -> FileResult:
        if pool is not None:
            plan = await loop.run_in_executor(pool, plan_file, path, recipe, options.budget)
        else:
            plan = await asyncio.to_thread(plan_file, path, recipe, options.budget)
        if isinstance(plan, Skipped):
            progress.file_done()
            return FileResult(path, "skipped", plan.reason)
        if options.journal is not None and options.journal.done(plan.path, plan.signature.sha256):
            progress.file_done()
            return FileResult(path, "unchanged", "already rewritten by this recipe (journal)", language=plan.language)
        progress.planned(len(plan.holes))
        if not plan.holes:
            progress.file_done()
            return FileResult(path, "unchanged", language=plan.language)
        async with gate:
            try:
                fills = await fill_plan(client, plan, options, progress.filled)
            except (asyncio.CancelledError, KeyboardInterrupt):
                raise
            except Exception as exc:  # the engine refused or failed this file: report it, go on
                progress.file_done()
                return FileResult(path, "skipped", f"engine: {type(exc).__name__}: {exc}", language=plan.language)
        result = await asyncio.to_thread(_finish, plan, fills, options.apply, options.journal)
        progress.file_done()
        return result

    try:
        return list(await asyncio.gather(*(one(p) for p in files)))
    finally:
        progress.close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def default_jobs() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
