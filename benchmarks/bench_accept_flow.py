"""A user who takes every suggestion: the time from Enter to the next line's ghost text, with the
next line's prefetch (setting prefetchNextLine) off and on, side by side in one run.

The keystroke replay (bench_lsp.py) types the real code, so a suggestion is used only when it
is the very line the typist types next; this measures the other flow, Tab-Enter-Tab: for each
of --functions standard-library functions (body removed, the cursor on the empty body's
first line as an editor's auto-indent leaves it), up to --lines times: ask (as VS Code does
after any edit, triggerKind Automatic), wait --read-ms (the user reads the ghost text), accept
it and press Enter (one didChange: the suggestion, the line break and the new line's
indentation as an editor's auto-indent makes it, syntax/after_accept.py, which is also the
prefetch's own guess: the guess is checked by bench_lsp.py --auto-indent, which indents each
new line as the real code does), then ask again and time that answer. A function ends at the
first request answered with nothing. The server runs the default model with every core (as an
editor starts it); the arms alternate per --repeats.

`--ask-after-accept MS`: the editor sends the accept as its own change and asks at once at the
accepted line's end (VS Code re-triggers after an accept; Neovim asks after its debounce), and
the user presses Enter MS later (a person's pause), as two changes instead of one.
`--server-root DIR`: the server's code from another checkout (a baseline commit's worktree).

    python benchmarks/bench_accept_flow.py [--functions 8] [--lines 6] [--read-ms 500] [--repeats 1]
        [--ask-after-accept 200] [--server-root DIR] [--json]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import random
import sys
import sysconfig
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from _bench_common import cpu_name
from bench_lsp import SERVER, caps, pct, server_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cases(count: int, seed: int = 0) -> list[tuple[str, str, int]]:
    """(uri, document with one function's body removed, the cursor on the empty body's first line)."""
    found = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue
        lines = source.split("\n")
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.end_lineno - node.body[0].lineno < 4:
                continue
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):  # skip the docstring
                continue
            header_end = first.lineno - 1  # the body's first line (0-based)
            if not lines[header_end - 1].rstrip().endswith(":"):
                continue
            indent = " " * first.col_offset
            doc = "\n".join(lines[:header_end] + [indent] + lines[node.end_lineno:])
            offset = len("\n".join(lines[:header_end])) + 1 + len(indent)
            found.append((f"{path.as_uri()}#{node.name}", doc, offset))
    random.Random(seed).shuffle(found)
    return found[:count]


def position(text: str, offset: int) -> types.Position:
    line = text.count("\n", 0, offset)
    return types.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))  # ASCII sources


def change(old: str, new: str) -> types.TextDocumentContentChangePartial:
    """The one range replacement that makes `new` of `old` (ASCII sources)."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    return types.TextDocumentContentChangePartial(
        range=types.Range(start=position(old, start), end=position(old, len(old) - end)),
        text=new[start:len(new) - end])


async def flow(prefetch: bool, functions: list[tuple[str, str, int]], lines: int, read_s: float,
               ask_after_accept_s: float | None = None, server_root: str | None = None) -> dict:
    from dllm_lsp.syntax.after_accept import after_enter
    from dllm_lsp.syntax.languages import language_for

    client = LanguageClient("bench", "0")
    statuses: list[dict] = []
    client.feature("dllm/status")(lambda p: statuses.append(p if isinstance(p, dict) else p._asdict()))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda p: None)
    client.feature(types.PROGRESS)(lambda p: None)
    env, cwd = server_env("all"), None
    if server_root:  # `python -m` puts the working directory first on sys.path: that checkout's too
        cwd = str(Path(server_root).resolve())
        env = {**env, "PYTHONPATH": env["PYTHONPATH"].replace(str(ROOT), cwd)}
    await client.start_io(*SERVER, env=env, cwd=cwd)
    await client.initialize_async(types.InitializeParams(
        capabilities=caps(), initialization_options={"prefetchNextLine": prefetch}))
    client.initialized(types.InitializedParams())
    while not statuses or statuses[-1]["state"] not in ("ready", "error"):
        await asyncio.sleep(0.05)
    python = language_for("x.py", "python")
    after_enter_ms, first_ms, accepted, at_line_end = [], [], [], []

    async def ask(uri: str, text: str, offset: int):
        t0 = time.perf_counter()
        result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=position(text, offset),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)))
        return (result.items[0] if result and result.items else None), (time.perf_counter() - t0) * 1000

    for uri, text, offset in functions:
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=text)))
        item, ms = await ask(uri, text, offset)
        first_ms.append(ms)
        for version in range(2, lines + 2):
            if item is None:
                break
            await asyncio.sleep(read_s)
            end = offset + (item.range.end.character - item.range.start.character) if item.range else offset
            edit = after_enter(text, offset, item.insert_text, end, python)
            if edit is None:
                break
            accepted.append(item.insert_text)
            ahead = text[:edit.start] + edit.text + text[edit.end:]
            version = 2 * version if ask_after_accept_s is not None else version
            if ask_after_accept_s is not None:  # the accept, the editor's request there, a pause, Enter
                taken = text[:offset] + item.insert_text + text[end:]
                client.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[change(text, taken)]))
                there, _ = await ask(uri, taken, offset + len(item.insert_text))
                at_line_end.append(there is not None)
                await asyncio.sleep(ask_after_accept_s)
                text, version = taken, version + 1
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[change(text, ahead)]))
            text, offset = ahead, edit.cursor
            item, ms = await ask(uri, text, offset)
            after_enter_ms.append(ms)
        client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
    stats = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="dllm.serverStats", arguments=[]))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {"accepted": len(accepted), "after_enter_n": len(after_enter_ms),
            "after_enter_p50_ms": pct(after_enter_ms, 0.5), "after_enter_p95_ms": pct(after_enter_ms, 0.95),
            "after_enter_ms": after_enter_ms, "first_request_p50_ms": pct(first_ms, 0.5),
            "prefetch": stats.get("prefetch"), "engine_requests": stats["engineRequests"], "texts": accepted,
            "suggested_at_line_end": sum(at_line_end)}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=8)
    ap.add_argument("--lines", type=int, default=6, help="lines accepted per function, at most")
    ap.add_argument("--read-ms", type=float, default=500.0, help="the pause between a suggestion and Tab-Enter")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ask-after-accept", type=float, default=None, metavar="MS",
                    help="ask at the accepted line's end, then press Enter MS later (default: accept and Enter "
                         "in one change, no request between)")
    ap.add_argument("--server-root", default=None, help="run the server's code from this checkout")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    between = args.ask_after_accept / 1000 if args.ask_after_accept is not None else None
    functions = cases(args.functions, args.seed)
    runs = {}
    for r in range(args.repeats):
        for prefetch in (False, True):
            runs[f"prefetch {'on' if prefetch else 'off'} ({r + 1})"] = await flow(
                prefetch, functions, args.lines, args.read_ms / 1000, between, args.server_root)
    report = {"cpu": cpu_name(), "read_ms": args.read_ms, "ask_after_accept_ms": args.ask_after_accept,
              "server_root": args.server_root, "functions": [u for u, _, _ in functions], "runs": runs}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    asked = "" if between is None else f", asked at the accepted line's end, Enter {args.ask_after_accept:.0f} ms later"
    print(f"{report['cpu']}, every core, {len(functions)} functions, read {args.read_ms:.0f} ms{asked}"
          f"{', server from ' + args.server_root if args.server_root else ''}")
    print("| arm | lines accepted | Enter to ghost text p50 / p95 ms | first request p50 ms | served by prefetch | "
          "prefetch engine requests (cancelled) | suggestions at the accepted line's end | "
          "same accepted text as the first arm |")
    print("|---|---|---|---|---|---|---|---|")
    first = next(iter(runs.values()))["texts"]
    for name, run in runs.items():
        p = run["prefetch"]
        print(f"| {name} | {run['accepted']} | {run['after_enter_p50_ms']:.0f} / {run['after_enter_p95_ms']:.0f} | "
              f"{run['first_request_p50_ms']:.0f} | {p['served']} of {run['after_enter_n']} | "
              f"{p['engineRequests']} ({p['engineCancelled']}) | {run['suggested_at_line_end']} | "
              f"{run['texts'] == first} |")


if __name__ == "__main__":
    asyncio.run(main())
