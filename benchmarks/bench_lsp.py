"""Language-server latency: typing replayed through `dllm-lsp serve` over stdio.

Measures, with the engine in process, for each model in --models (default: the default model):
- keystroke to inline result: each keystroke sends didChange + textDocument/inlineCompletion
  (as VS Code does) at a fixed typing speed; the time to each response, p50 / p95
  (all responses, and responses carrying a suggestion; how many of those the typist then
  typed, their first line and the whole of them), and, measured in the server,
  request arrival to the engine's answer for the requests the engine finished
  (whether or not output shaping kept the answer);
- the Enter keystrokes: how many got a suggestion, and how soon (the next line's prefetch,
  `--prefetch`, answers there from the cache when the line before was the suggested one);
- the fraction of superseded requests cancelled before the engine finished them;
- server memory (max RSS, model included);
- process start to `initialize` response, side by side with a bare pygls server
  (alternating runs, medians).

The typed text: function bodies from the standard library (`inspect.getsource`),
typed back character by character into their module with the body removed, from the newline
that ends the header (so each function starts with a pause at its empty body),
80 ms between keystrokes and a 4 s pause after each newline, `=` and `(`. With `--auto-indent`
Enter types the line break and the real next line's indentation in one change, as an editor's
auto-indent does; `--functions` types other functions (code deep in a large module moves the
prefix window's start, which the default three, mostly docstrings, never do).

    python benchmarks/bench_lsp.py [--chars 160] [--interval-ms 80] [--pause-ms 4000] [--starts 11]
    python benchmarks/bench_lsp.py --skip-startup --multiline emptyBlock,always   # the two policies side by side
    python benchmarks/bench_lsp.py --skip-startup --threads 1,all   # one thread against every core
    python benchmarks/bench_lsp.py --skip-startup --auto-indent --prefetch off,on   # the next line's prefetch
    python benchmarks/bench_lsp.py --skip-startup --threads all --empty-body any,code   # code first at an empty body
    python benchmarks/bench_lsp.py --skip-startup --threads all --rest 1 --prepare off,on   # the context prepared at rest
    python benchmarks/bench_lsp.py --skip-startup --threads all --multiline-min-prob 0,0.15   # the multi-line gate
    python benchmarks/bench_lsp.py --skip-startup --threads all --diagnostics off,on   # hints' scoring beside typing
    python benchmarks/bench_lsp.py --skip-startup --threads all --near-tokens 0,384   # a new place read near first
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import itertools
import json
import os
import platform
import fnmatch
import statistics
import sys
import textwrap
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from _bench_common import cpu_name

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("", "engine", "kernels")),
       "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def server_env(threads: str | None) -> dict[str, str]:
    """The server's environment for a --threads entry: a count, or "all" (no OMP_NUM_THREADS:
    torch takes every core, as a user's editor starts the server)."""
    if threads is None:
        return ENV
    env = {k: v for k, v in ENV.items() if k != "OMP_NUM_THREADS"}
    return env if threads == "all" else {**env, "OMP_NUM_THREADS": threads}
SERVER = [sys.executable, "-m", "dllm_lsp", "serve"]
BARE = [sys.executable, "-c", "from pygls.lsp.server import LanguageServer; LanguageServer('bare', '0').start_io()"]
FUNCTIONS = [textwrap.dedent, textwrap.TextWrapper._wrap_chunks, fnmatch.translate]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def caps() -> types.ClientCapabilities:
    return types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))


async def time_to_initialize(cmd: list[str]) -> float:
    client = LanguageClient("bench", "0")
    start = time.perf_counter()
    await client.start_io(*cmd, env=ENV)
    await client.initialize_async(types.InitializeParams(capabilities=caps(), initialization_options={}))
    elapsed = time.perf_counter() - start
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return elapsed


def resolve(spec: str):
    """A function from "module:qualified.name" (e.g. "argparse:HelpFormatter._format_usage")."""
    import importlib

    module, _, name = spec.partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def replay_cases(chars: int, functions=None, start_at: str = "body") -> list[tuple[str, str, int, str]]:
    """(uri, document with the typed text removed, offset where typing starts, text to type).

    `start_at` "body": typing starts with the newline that ends the header, so the first
    request is at the empty body (the one place the default policy, multiline: emptyBlock,
    offers many lines), a place the server has seen nothing of. "header": the typist writes
    the function from its `def` (decorators and the def's indentation stay), as someone
    writing a new function does; `chars` counts the body's characters either way."""
    cases = []
    for fn in functions or FUNCTIONS:
        module_source = Path(inspect.getsourcefile(fn)).read_text()
        source = inspect.getsource(fn)
        header_end = source.index(":\n", source.index("def ")) + 1
        begin = module_source.index(source)
        start = begin + (header_end if start_at == "body" else source.index("def "))
        typed = module_source[start:begin + len(source)]
        typed = typed[:chars + (0 if start_at == "body" else header_end - source.index("def "))]
        doc = module_source[:start] + module_source[begin + len(source):]
        cases.append((Path(inspect.getsourcefile(fn)).as_uri() + f"#{fn.__name__}", doc, start, typed))
    return cases


def keystrokes(body: str, auto_indent: bool) -> list[str]:
    """The body as typed: a character a keystroke, or, with `auto_indent`, Enter as an editor
    makes it: the line break and the next line's indentation in one change (here the real
    line's own, so a guess of the editor's indentation is checked against it)."""
    if not auto_indent:
        return list(body)
    keys, i = [], 0
    while i < len(body):
        if body[i] == "\n":
            j = i + 1
            while j < len(body) and body[j] in " \t":
                j += 1
            keys.append(body[i:j])
            i = j
        else:
            keys.append(body[i])
            i += 1
    return keys


async def replay(chars: int, interval_s: float, pause_s: float, pause_after: str, settings: dict,
                 env: dict[str, str] = ENV, auto_indent: bool = False, functions=None,
                 rest_s: float = 0.0, prepare: bool = False, start_at: str = "body") -> dict:
    client = LanguageClient("bench", "0")
    statuses: list[dict] = []
    client.feature("dllm/status")(lambda params: statuses.append(params._asdict() if hasattr(params, "_asdict") else params))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda params: None)
    client.feature(types.PROGRESS)(lambda params: None)
    client.feature(types.WINDOW_SHOW_MESSAGE)(lambda params: print("showMessage:", params.message, file=sys.stderr))
    t0 = time.perf_counter()
    await client.start_io(*SERVER, env=env)
    await client.initialize_async(types.InitializeParams(capabilities=caps(), initialization_options=settings))
    client.initialized(types.InitializedParams())
    while not statuses or statuses[-1]["state"] not in ("ready", "error"):
        await asyncio.sleep(0.05)
    ready_s = time.perf_counter() - t0
    assert statuses[-1]["state"] == "ready", statuses[-1]

    latencies, with_items, pending = [], [], []
    right = {"first_line": 0, "whole": 0}  # shown suggestions the typist then typed (their first line, all of it)
    after_enter: list[float | None] = []  # per Enter keystroke: the time to its suggestion, None for none
    for uri, doc, offset, body in replay_cases(chars, functions, start_at):
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=doc)))
        line = doc.count("\n", 0, offset)
        col = offset - (doc.rfind("\n", 0, offset) + 1)
        if prepare:  # what our editor clients send where the cursor comes to rest
            client.protocol.notify("dllm/prepareCompletion", {"textDocument": {"uri": uri, "version": 1},
                                                              "position": {"line": line, "character": col}})
        await asyncio.sleep(rest_s)  # the typist looks at the code before typing
        typed = 0  # characters of `body` typed so far
        for version, ch in enumerate(keystrokes(body, auto_indent), start=2):
            typed += len(ch)
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line=line, character=col),
                                      end=types.Position(line=line, character=col)), text=ch)]))
            if ch.startswith("\n"):
                line, col = line + 1, len(ch) - 1
            else:
                col += 1  # ASCII source: one UTF-16 unit per character
            sent = time.perf_counter()
            fut = client.text_document_inline_completion_async(types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=col),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)))

            async def timed(fut=fut, sent=sent, enter=ch.startswith("\n"), rest=body[typed:]):
                result = await fut
                elapsed = (time.perf_counter() - sent) * 1000
                latencies.append(elapsed)
                if result is not None and result.items:
                    with_items.append(elapsed)
                    text = result.items[0].insert_text
                    text = text if isinstance(text, str) else text.value
                    first = text.split("\n")[0]
                    right["first_line"] += bool(first.strip()) and rest.startswith(first)
                    right["whole"] += bool(text.strip()) and rest.startswith(text)
                if enter:
                    after_enter.append(elapsed if result is not None and result.items else None)

            pending.append(asyncio.ensure_future(timed()))
            # A typist pauses at the end of a line and after `=` or `(`: that is when a
            # suggestion has time to arrive.
            await asyncio.sleep(pause_s if ch[0] in pause_after else interval_s)
    await asyncio.gather(*pending)
    stats = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="dllm.serverStats", arguments=[]))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    sched = stats["scheduler"]
    answers = stats["engineAnswerMs"]
    enter_suggested = [ms for ms in after_enter if ms is not None]
    superseded = sched["superseded"]
    return {
        "keystrokes": len(latencies),
        "ready_s": ready_s,
        "p50_ms": pct(latencies, 0.5), "p95_ms": pct(latencies, 0.95),
        "with_suggestion": len(with_items),
        "right_first_line": right["first_line"], "right_whole": right["whole"],
        "suggestion_p50_ms": pct(with_items, 0.5), "suggestion_p95_ms": pct(with_items, 0.95),
        "enter_keystrokes": len(after_enter), "enter_with_suggestion": len(enter_suggested),
        "enter_suggestion_p50_ms": pct(enter_suggested, 0.5), "enter_suggestion_p95_ms": pct(enter_suggested, 0.95),
        "prefetch": stats.get("prefetch"),
        "engine_answered": len(answers),
        "engine_answer_p50_ms": pct([a["ms"] for a in answers], 0.5),
        "engine_answer_p95_ms": pct([a["ms"] for a in answers], 0.95),
        "engine_answer_by_kind": {
            kind: {"n": len(ms), "p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95)}
            for kind in ("line", "multiline", "block")
            if (ms := [a["ms"] for a in answers if a["kind"] == kind])},
        "superseded": superseded,
        "superseded_cancelled_fraction": (sched["superseded_in_debounce"] + stats["engineCancelled"]) / superseded
        if superseded else None,
        "cache_hits": sched["cache_hits"],
        "unsure_hidden": sched.get("unsure_hidden"),  # fills the engine ended unsure, nothing shown
        "unsure_cut": sched.get("unsure_cut"),  # multi-line ones shown up to their last complete line
        "engine_requests": stats["engineRequests"],
        "max_rss_mb": stats["maxRssKb"] / 1024,
        "mean_pass_ms": (stats.get("engineHealth") or {}).get("mean_pass_ms"),
        # Every request's encoding, the superseded ones' too (their K/V are kept and reused).
        "context_tokens_encoded": (stats.get("engineHealth") or {}).get("context_tokens_encoded"),
        "engine_requests_cancelled": (stats.get("engineHealth") or {}).get("requests_cancelled"),
        "answers": answers,  # each with the engine's breakdown: queue, passes, context tokens encoded
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chars", type=int, default=160, help="characters typed per function")
    ap.add_argument("--interval-ms", type=float, default=80.0, help="time between keystrokes")
    ap.add_argument("--pause-ms", type=float, default=4000.0, help="pause after typing one of --pause-after")
    ap.add_argument("--pause-after", default="\n=(", help="characters after which the typist pauses")
    ap.add_argument("--starts", type=int, default=11, help="initialize timings per server")
    ap.add_argument("--max-passes", type=int, default=None, help="the diffusion.maxPasses setting")
    ap.add_argument("--skip-startup", action="store_true", help="only the typing replay")
    ap.add_argument("--models", default="default",
                    help="comma list of engine.model settings, replayed one after another (e.g. default,small)")
    ap.add_argument("--multiline", default=None,
                    help="comma list of the multiline setting (emptyBlock, always, never), each replayed per "
                         "model in this order; default: the server's default only")
    ap.add_argument("--threads", default=None,
                    help="comma list of the server's OMP_NUM_THREADS (a count, or all: unset, every core, "
                         "as an editor starts it), each replayed per model and policy; default: "
                         "$OMP_NUM_THREADS, else 1")
    ap.add_argument("--auto-indent", action="store_true",
                    help="Enter inserts the line break and the next line's indentation in one change, as an "
                         "editor's auto-indent does (default: every character typed, spaces included)")
    ap.add_argument("--prefetch", default=None,
                    help="comma list of the prefetchNextLine setting (on, off), each replayed per model, "
                         "policy and thread count; default: the server's default only")
    ap.add_argument("--max-lines", default=None,
                    help="comma list of the multilineMaxLines setting, each replayed per model, policy, thread "
                         "count and prefetch (e.g. 200,4: no cap against the default); default: the server's only")
    ap.add_argument("--empty-body", default=None,
                    help="comma list of the emptyBody setting (code, any), each replayed per model, policy, "
                         "thread count, prefetch and cap; default: the server's only")
    ap.add_argument("--rest", type=float, default=0.0,
                    help="seconds the typist rests at each function's start (the cursor put there) before typing")
    ap.add_argument("--prepare", default=None,
                    help="comma list of off, on: whether the editor sends dllm/prepareCompletion where the cursor "
                         "rests (at each function's start), each replayed per model, policy, thread count, "
                         "prefetch, cap and empty-body policy; default: off")
    ap.add_argument("--line-min-prob", default=None,
                    help="comma list of the lineMinTokenProb setting (0: off), each replayed per model, policy, "
                         "thread count, prefetch, cap, empty-body policy and prepare; default: the server's only")
    ap.add_argument("--multiline-min-prob", default=None,
                    help="comma list of the multilineMinTokenProb setting (0: off), each replayed per model, "
                         "policy, thread count, prefetch, cap, empty-body policy, prepare and line gate; "
                         "default: the server's only")
    ap.add_argument("--diagnostics", default=None,
                    help="comma list of off, on: the diagnostics setting (suspicious-token hints, scored on the "
                         "engine thread while the typist rests), each replayed per model and every setting above; "
                         "default: the server's only")
    ap.add_argument("--near-tokens", default=None,
                    help="comma list of the context.nearTokens setting (0: every context read whole), each "
                         "replayed per model and every setting above; default: the server's only")
    ap.add_argument("--functions", default=None,
                    help="comma list of module:qualified.name to type instead of the default three "
                         "(e.g. argparse:HelpFormatter._format_usage: code typed deep in a large module)")
    ap.add_argument("--start", default="body",
                    help="comma list of body, header: where typing starts in each function (header: the typist "
                         "writes its def line too), each replayed per model and every setting above; default: body")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    startup = None
    if not args.skip_startup:
        ours, bare = [], []
        for _ in range(args.starts):  # alternate so both see the same machine load
            ours.append(await time_to_initialize(SERVER))
            bare.append(await time_to_initialize(BARE))
        startup = {"dllm_ms": statistics.median(ours) * 1000, "bare_pygls_ms": statistics.median(bare) * 1000}
        startup["difference_ms"] = startup["dllm_ms"] - startup["bare_pygls_ms"]
    typing = {}
    policies = args.multiline.split(",") if args.multiline else [None]
    thread_counts = args.threads.split(",") if args.threads else [None]
    prefetches = args.prefetch.split(",") if args.prefetch else [None]
    functions = [resolve(f) for f in args.functions.split(",")] if args.functions else None
    caps = args.max_lines.split(",") if args.max_lines else [None]
    empty_bodies = args.empty_body.split(",") if args.empty_body else [None]
    prepares = args.prepare.split(",") if args.prepare else [None]
    gates = args.line_min_prob.split(",") if args.line_min_prob else [None]
    block_gates = args.multiline_min_prob.split(",") if args.multiline_min_prob else [None]
    starts = args.start.split(",")
    hints = args.diagnostics.split(",") if args.diagnostics else [None]
    nears = args.near_tokens.split(",") if args.near_tokens else [None]
    for model in args.models.split(","):
        for policy, threads, prefetch, cap, empty_body, prepare, gate, block_gate, start_at, hint, near in itertools.product(
                policies, thread_counts, prefetches, caps, empty_bodies, prepares, gates, block_gates, starts, hints,
                nears):
            settings = {"engine": {"model": model}}
            if args.max_passes:
                settings["diffusion"] = {"maxPasses": args.max_passes}
            if policy:
                settings["multiline"] = policy
            if prefetch:
                settings["prefetchNextLine"] = prefetch == "on"
            if cap:
                settings["multilineMaxLines"] = int(cap)
            if empty_body:
                settings["emptyBody"] = empty_body
            if gate:
                settings["lineMinTokenProb"] = float(gate)
            if block_gate:
                settings["multilineMinTokenProb"] = float(block_gate)
            if hint:
                settings["diagnostics"] = hint == "on"
            if near:
                settings["context"] = {"nearTokens": int(near)}
            name = model + (f", multiline {policy}" if policy else "") + (f", threads {threads}" if threads else "")
            name += f", prefetch {prefetch}" if prefetch else ""
            name += f", max lines {cap}" if cap else ""
            name += f", empty body {empty_body}" if empty_body else ""
            name += f", prepare {prepare}" if prepare else ""
            name += f", lineMinTokenProb {gate}" if gate else ""
            name += f", multilineMinTokenProb {block_gate}" if block_gate else ""
            name += f", typed from the {start_at}" if len(starts) > 1 or start_at != "body" else ""
            name += f", diagnostics {hint}" if hint else ""
            name += f", nearTokens {near}" if near else ""
            name += f" ({sum(k.startswith(name) for k in typing) + 1})" if name in typing else ""  # a repeat
            typing[name] = await replay(args.chars, args.interval_ms / 1000, args.pause_ms / 1000,
                                        args.pause_after, settings, server_env(threads), args.auto_indent,
                                        functions, args.rest, prepare == "on", start_at)
    report = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
              "cpu": cpu_name(), "interval_ms": args.interval_ms, "pause_ms": args.pause_ms,
              "pause_after": args.pause_after, "auto_indent": args.auto_indent,
              "functions": args.functions, "max_passes": args.max_passes, "startup": startup, "typing": typing}
    print(json.dumps(report, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in report.items()))


if __name__ == "__main__":
    asyncio.run(main())
