"""The first suggestion at a new place, with and without `dllm/prepareCompletion`.

A user clicks at the end of a line somewhere in a file, rests there for a moment, presses
Enter (the editor's auto-indent: the line's own indentation), and the editor asks for ghost
text on the new line. That request's context shares nothing with anything cached (the native
context starts with the suffix), so without a prepare it encodes the whole context before its
first pass. With one, the client has sent the place when the cursor came to rest (VS Code: 250
ms after the click) and the engine has been encoding it since.

Replayed through `dllm-lsp serve` over stdio (the engine in process, every core as an editor
starts it, `prefetchNextLine` off so no background fill runs between places), on code lines in
function bodies of standard-library modules (not a block opener, so the new line gets a
single-line suggestion). Each place is used once (a second visit would find the first one's
context cached); places alternate between the arms, in ABBA order per pause. Measured: Enter to
the response, as the editor waits; the engine's context tokens and how many of them came from
the cache (`dllm.serverStats`). `--pauses`: seconds between the prepare and the Enter (the
time the user spends reading, less the client's 250 ms rest).

`--chunks` measures the engine alone instead: a place's context encoded at once against the
same context in chunks of N tokens (prepare.py's PREPARE_CHUNK), interleaved, in one process.

    python benchmarks/bench_cursor_prepare.py [--places 16] [--pauses 0.3,0.8,2.0] [--json]
    python benchmarks/bench_cursor_prepare.py --arms none,elsewhere --pauses 0.3,0.8   # a wasted prepare's cost
    python benchmarks/bench_cursor_prepare.py --chunks 64,128,256 [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from _bench_common import cpu_name

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "engine"), str(ROOT / "kernels")]
from bench_lsp import SERVER, caps, pct, server_env  # noqa: E402

MODULES = ["argparse", "configparser", "csv", "difflib", "email.message", "ftplib", "gettext", "imaplib",
           "json.decoder", "logging.handlers", "mailbox", "optparse", "pprint", "shlex", "smtplib", "string",
           "tarfile", "textwrap", "zipfile", "calendar"]


def places(count: int, seed: int) -> list[tuple[str, str, int, str]]:
    """(uri, text, offset at a code line's end, the indentation Enter gives), from distinct modules
    first: a line in a function body, not a block opener, a comment, a decorator or a line
    that continues a bracket."""
    rng = random.Random(seed)
    found = []
    pool = MODULES * (1 + count // len(MODULES))
    for name in pool[:count]:
        module = importlib.import_module(name)
        path = Path(inspect.getsourcefile(module))
        text = path.read_text()
        lines = text.split("\n")
        candidates = []
        offset = 0
        for i, line in enumerate(lines):
            stripped = line.strip()
            indent = len(line) - len(line.lstrip(" "))
            if (indent >= 8 and stripped and not stripped.startswith(("#", "@", '"', "'")) and not stripped.endswith(
                    (":", ",", "(", "[", "{", "\\")) and i + 1 < len(lines)
                    and lines[i + 1].strip() and stripped.count("(") == stripped.count(")") and 200 < i < len(lines) - 40):
                candidates.append((offset + len(line), " " * indent))
            offset += len(line) + 1
        end, indent = rng.choice(candidates)
        found.append((path.as_uri() + f"#{len(found)}", text, end, indent))
    return found


def position(text: str, offset: int) -> types.Position:
    return types.Position(line=text.count("\n", 0, offset), character=offset - (text.rfind("\n", 0, offset) + 1))


async def replay(args) -> dict:
    client = LanguageClient("bench", "0")
    statuses: list[dict] = []
    client.feature("dllm/status")(lambda p: statuses.append(p._asdict() if hasattr(p, "_asdict") else p))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda p: None)
    client.feature(types.PROGRESS)(lambda p: None)
    t0 = time.perf_counter()
    await client.start_io(*SERVER, env=server_env(args.threads))
    settings = {"prefetchNextLine": False, "debounceMs": 0}
    await client.initialize_async(types.InitializeParams(capabilities=caps(), initialization_options=settings))
    client.initialized(types.InitializedParams())
    while not statuses or statuses[-1]["state"] not in ("ready", "error"):
        await asyncio.sleep(0.05)
    assert statuses[-1]["state"] == "ready", statuses[-1]
    ready_s = time.perf_counter() - t0

    async def stats() -> dict:
        return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="dllm.serverStats"))

    pauses = [float(p) for p in args.pauses.split(",")]
    all_places = places(args.places * len(args.arms.split(",")) * len(pauses), args.seed)
    rows = []
    k = 0
    arms = args.arms.split(",")
    for pause in pauses:
        for i in range(args.places * len(arms)):
            # Each block of len(arms) places runs every arm once, the order rotating block by block
            # (ABBA for two arms), so a drift in the machine's speed falls on every arm alike.
            block, j = divmod(i, len(arms))
            arm = arms[(j + block) % len(arms)] if len(arms) > 2 else arms[j if block % 2 == 0 else 1 - j]
            uri, text, offset, indent = all_places[k]
            k += 1
            client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text)))
            await asyncio.sleep(0.3)  # the open's parse, as a user's click comes after the file shows
            rest = position(text, offset)
            if arm in ("prepare", "elsewhere"):
                # "elsewhere": the cursor rested 20 lines above, then the user typed here (a prepare wasted).
                where = rest if arm == "prepare" else types.Position(line=max(0, rest.line - 20), character=0)
                client.protocol.notify("dllm/prepareCompletion", {"textDocument": {"uri": uri, "version": 1},
                                                                  "position": {"line": where.line, "character": where.character}})
            await asyncio.sleep(pause)
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=rest, end=rest), text="\n" + indent)]))
            sent = time.perf_counter()
            result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=rest.line + 1, character=len(indent)),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)))
            elapsed = (time.perf_counter() - sent) * 1000
            s = await stats()
            answer = s["engineAnswerMs"][-1] if s["engineAnswerMs"] else {}
            text_shown = result.items[0].insert_text if result is not None and result.items else ""
            rows.append({"pause_s": pause, "arm": arm, "ms": elapsed, "shown": bool(text_shown),
                         "text": text_shown if isinstance(text_shown, str) else text_shown.value,
                         "context_tokens": answer.get("contextTokens"), "cached_tokens": answer.get("cachedTokens"),
                         "passes": answer.get("passes"), "uri": uri})
            client.text_document_did_close(types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            print(f"pause {pause:.1f} {arm:8s} {elapsed:7.0f} ms  context {answer.get('contextTokens')} "
                  f"cached {answer.get('cachedTokens')} passes {answer.get('passes')}", file=sys.stderr)
    final = await stats()
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    summary = {}
    for pause in pauses:
        for arm in args.arms.split(","):
            mine = [r for r in rows if r["pause_s"] == pause and r["arm"] == arm]
            ms = [r["ms"] for r in mine]
            fresh = [r["context_tokens"] - r["cached_tokens"] for r in mine if r["context_tokens"] is not None]
            summary[f"{pause:g}s {arm}"] = {
                "n": len(mine), "p50_ms": statistics.median(ms), "p95_ms": pct(ms, 0.95),
                "mean_ms": statistics.fmean(ms), "shown": sum(r["shown"] for r in mine),
                "encoded_at_request_p50": statistics.median(fresh) if fresh else None,
                "context_tokens_p50": statistics.median(r["context_tokens"] for r in mine if r["context_tokens"]),
            }
    return {"ready_s": ready_s, "summary": summary, "cursor_prepare": final.get("cursorPrepare"), "rows": rows}


def chunks(args) -> dict:
    """The engine alone: a context encoded whole against in chunks, interleaved."""
    import torch

    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.prepare import PrepareRequest, context_ids, prepare_context

    engine = Engine(EngineConfig(threads=args.engine_threads))
    sizes = [int(c) for c in args.chunks.split(",")]
    out: dict[str, list[float]] = {"whole": [], **{str(c): [] for c in sizes}}
    tokens = []
    for _, text, offset, _ in places(args.repeats, args.seed):
        request = PrepareRequest(prefix=text[max(0, offset - 3000):offset], suffix=text[offset:offset + 1000])
        ids = engine.between_passes(lambda: context_ids(engine, request))
        tokens.append(ids.numel())
        for arm in ["whole", *map(str, sizes)]:
            engine.drop_caches()
            start = time.perf_counter()
            if arm == "whole":
                engine.between_passes(lambda: engine.runner.encode_tokens(ids))
            else:
                assert prepare_context(engine, request, chunk=int(arm)).complete
            out[arm].append((time.perf_counter() - start) * 1000)
    engine.shutdown()
    base = statistics.median(out["whole"])
    return {"tokens": tokens, "torch": torch.__version__,
            "median_ms": {k: statistics.median(v) for k, v in out.items()},
            "ratio_to_whole": {k: statistics.median(v) / base for k, v in out.items()}, "ms": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--places", type=int, default=16, help="places per arm and pause")
    ap.add_argument("--pauses", default="0.3,0.8,2.0")
    ap.add_argument("--arms", default="none,prepare",
                    help="none, prepare (the place typed at), elsewhere (a place 20 lines above: the cost of a wasted prepare)")
    ap.add_argument("--threads", default="all", help="the server's threads: a count, or all (as an editor starts it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunks", default=None, help="engine only: chunk sizes to compare with one forward")
    ap.add_argument("--repeats", type=int, default=5, help="--chunks: places")
    ap.add_argument("--engine-threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report = {"cpu": cpu_name(), "machine": platform.machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    report.update(chunks(args) if args.chunks else asyncio.run(replay(args)))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(json.dumps({k: v for k, v in report.items() if k not in ("rows", "ms")}, indent=1))


if __name__ == "__main__":
    main()
