"""One `dllm-lsp refactor` run: engine client, signals, output, report and exit code.

SIGTERM is turned into the same cancellation as Ctrl-C: files not yet written
stay old, a file being written is replaced whole (os.replace) or not at all.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time

from dllm_lsp.refactor.planner import Skipped
from dllm_lsp.refactor.recipes import Recipe
from dllm_lsp.refactor.report import build_report, write_report
from dllm_lsp.refactor.runner import FileResult, RunOptions, refactor_files

EXIT_OK, EXIT_CHANGES, EXIT_SKIPPED, EXIT_UNFILLED = 0, 1, 3, 4


def make_client(engine: str, model: str | None, socket: str | None):
    from dllm_engine.clients import DaemonClient, InProcessClient

    if engine == "daemon":
        return DaemonClient(socket_path=socket, spawn=True, model=model)
    return InProcessClient(model=model)


async def _run_local(args, recipe: Recipe, files: list[str], options: RunOptions) -> list[FileResult]:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    # Ctrl-C too cancels from the event loop, between its callbacks. asyncio.run's own SIGINT
    # handler cancels the task from inside whatever code the signal lands in: landing inside a
    # semaphore's release (between its waiter's done() and set_result()) it cancelled that very
    # waiter, the release raised InvalidStateError and the run exited 1 with a traceback instead
    # of 130 (a CI run of tests/refactor/test_interrupt.py, thirty-fifth session). A run started
    # with Ctrl-C ignored (a background job) keeps it ignored.
    signals = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else [])
    for sig in signals:
        try:
            loop.add_signal_handler(sig, task.cancel)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here:
            pass  # the default handling stays (Ctrl-C through asyncio.run's own handler)
    client = make_client(args.engine, args.model, args.socket)
    try:
        return await refactor_files(files, recipe, client, options)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        await client.close()


def _exit_code(results: list[FileResult], check: bool) -> int:
    """With --check: 4 when a hole's fill was rejected and the hole is still there (a CI gate
    must not pass on it), winning over 1 (changes) since applying would not finish the job;
    then 1, then 3 (skipped files). Without --check: 3 or 0."""
    changed = any(r.status in ("changed", "written") for r in results)
    unfilled = any(not o.applied for r in results for o in r.outcomes)
    if check and unfilled:
        return EXIT_UNFILLED
    if check and changed:
        return EXIT_CHANGES
    if any(r.status in ("skipped", "not-written") for r in results):
        return EXIT_SKIPPED
    return EXIT_OK


def run_session(args, recipe: Recipe, files: list[str], missing: list[Skipped], options: RunOptions) -> int:
    t0 = time.perf_counter()
    if args.ray:
        from dllm_lsp.refactor.ray_shard import run_on_ray

        results = run_on_ray(args.ray, args.ray_workers, files, recipe, options,
                             {"engine": args.engine, "model": args.model, "socket": args.socket})
    else:
        results = asyncio.run(_run_local(args, recipe, files, options))
    results = [FileResult(s.path, "skipped", s.reason) for s in missing] + results
    elapsed = time.perf_counter() - t0
    if not args.quiet and not args.apply:
        for r in sorted(results, key=lambda r: r.path):
            sys.stdout.write(r.diff)
        sys.stdout.flush()
    for r in results:
        if r.status in ("skipped", "not-written"):
            print(f"dllm-lsp refactor: {r.status} {r.path}: {r.reason}", file=sys.stderr)
    report = build_report(results, recipe.name, options.apply, elapsed)
    if args.report:
        write_report(args.report, report)
    s = report["summary"]
    verb = "written" if options.apply else "would change"
    print(f"dllm-lsp refactor: {s['files']} files, {s['holes']} holes, {s['applied']} filled, "
          f"{s['changed']} files {verb}, {s['skipped']} skipped, {s['not_written']} not written "
          f"in {elapsed:.1f}s", file=sys.stderr)
    return _exit_code(results, args.check)
