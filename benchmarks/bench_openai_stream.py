"""Streaming through the OpenAI endpoint: time to the first chunk and to the full fill.

Starts `dllm-lsp engine serve` on TCP (token), then sends the same fill-in-the-middle
requests to /v1/completions with and without `"stream": true`, alternating, and reports
p50 / p95 of: the non-streamed answer; the first streamed chunk that carries text; the
streamed fill's end (`data: [DONE]`). Fills are 32 tokens (`max_tokens` 32, greedy) of
function bodies from the standard library (40 lines of prefix, 20 of suffix around the hole).
Each case's context is encoded once first by an unmeasured 1-token request, so both measured
requests find it cached (as a keystroke's request mostly does): the comparison is the
denoising and the transport, not which of the two paid for the context.

    python benchmarks/bench_openai_stream.py [--model default] [--requests 50] [--results benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import httpx

sys.path.insert(0, os.path.dirname(__file__))
from _bench_common import cpu_name, emit  # noqa: E402

TOKEN = "bench-token"


PREFIX_LINES, SUFFIX_LINES = 40, 20  # what an editor plugin's budget sends around the cursor


def fim_cases(count: int) -> list[tuple[str, str]]:
    """(prefix, suffix) pairs: a function of a stdlib module cut after the first statement of its
    body, with the 40 lines before the hole and the 20 after it."""
    import json as m1, textwrap as m2, difflib as m3, argparse as m4, csv as m5  # noqa: E401

    cases = []
    for module in (m1, m2, m3, m4, m5):
        source = inspect.getsource(module)
        lines = source.splitlines(keepends=True)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and len(node.body) >= 3 and node.body[0].lineno > node.lineno:
                cut = node.body[1].lineno - 1  # the hole starts at the body's second statement
                end = node.body[-1].end_lineno
                cases.append(("".join(lines[max(0, cut - PREFIX_LINES):cut]), "".join(lines[end:end + SUFFIX_LINES])))
    return [cases[(i * 7) % len(cases)] for i in range(count)]


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def start_daemon(model: str, threads: int, dtype: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--host", "127.0.0.1",
                             "--port", str(port), "--token", TOKEN, "--model", model, "--threads", str(threads),
                             "--dtype", dtype])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/health", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"daemon exited with {proc.returncode}")
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("daemon did not load its model in 600 s")


def plain(c: httpx.Client, body: dict) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = c.post("/v1/completions", json=body)
    r.raise_for_status()
    return time.perf_counter() - t0, r.json()["usage"]["completion_tokens"]


def streamed(c: httpx.Client, body: dict) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    first, chunks = None, 0
    with c.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                break
            if json.loads(line[6:])["choices"][0]["text"]:
                chunks += 1
                first = first if first is not None else time.perf_counter() - t0
    end = time.perf_counter() - t0
    return first if first is not None else end, end, chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                    help="the daemon's --dtype (bf16, auto's choice on AMX CPUs, ran 7x slower than fp32 on a loaded host)")
    ap.add_argument("--results", default=None, help="append the section to this file (RESULTS.md)")
    args = ap.parse_args()
    proc, base = start_daemon(args.model, args.threads, args.dtype)
    try:
        cases = fim_cases(args.requests)
        t_plain, t_first, t_full, chunks, tokens = [], [], [], [], []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=600) as c:
            plain(c, {"prompt": cases[0][0], "suffix": cases[0][1], "max_tokens": 4})  # warm-up: first pass
            for i, (prefix, suffix) in enumerate(cases):
                body = {"model": "bench", "prompt": prefix, "suffix": suffix, "max_tokens": args.max_tokens}
                plain(c, {**body, "max_tokens": 1})  # the context, cached for both measured requests
                # Alternate which goes first, so neither always finds the context cache warm.
                runs = [("plain", body), ("stream", body)] if i % 2 == 0 else [("stream", body), ("plain", body)]
                for kind, b in runs:
                    if kind == "plain":
                        seconds, n = plain(c, b)
                        t_plain.append(seconds)
                        tokens.append(n)
                    else:
                        first, full, k = streamed(c, b)
                        t_first.append(first)
                        t_full.append(full)
                        chunks.append(k)
                print(f"{i + 1}/{len(cases)}: plain {1000 * t_plain[-1]:.0f} ms, first chunk {1000 * t_first[-1]:.0f} "
                      f"ms, streamed {1000 * t_full[-1]:.0f} ms", file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait(30)

    def row(name: str, values: list[float]) -> str:
        return f"| {name} | {1000 * percentile(values, 0.5):.0f} | {1000 * percentile(values, 0.95):.0f} |"

    p50 = percentile
    lines = [
        f"- command: `python benchmarks/bench_openai_stream.py --model {args.model} --requests {args.requests} "
        f"--max-tokens {args.max_tokens} --threads {args.threads} --dtype {args.dtype}`",
        f"- machine: {cpu_name()}, daemon with {args.threads} torch threads; other sessions shared the cores",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- fills: {len(tokens)} per mode, max_tokens {args.max_tokens}, greedy; completion tokens p50 "
        f"{statistics.median(tokens):.0f} (min {min(tokens)}, max {max(tokens)}); text chunks per streamed fill "
        f"p50 {statistics.median(chunks):.0f} (min {min(chunks)}, max {max(chunks)})",
        "",
        "| ms | p50 | p95 |",
        "|---|---|---|",
        row("non-streamed answer", t_plain),
        row("streamed: first text chunk", t_first),
        row("streamed: full fill ([DONE])", t_full),
        "",
        f"- first chunk / non-streamed (p50): {p50(t_first, 0.5) / p50(t_plain, 0.5):.2f}; "
        f"streamed full / non-streamed (p50): {p50(t_full, 0.5) / p50(t_plain, 0.5):.2f}",
    ]
    emit("\n".join([f"### /v1/completions streaming, model {args.model}", "", *lines]), args.results)


if __name__ == "__main__":
    main()
