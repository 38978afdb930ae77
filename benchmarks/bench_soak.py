"""Soak: many mixed requests against the real language server and the real daemon; memory must stay flat.

Two processes on the small model (DLLM_LSP_MODEL=small unless set), driven at the same time:
- `dllm-lsp serve` with its engine in process, over stdio (benchmarks/_lsp_wire.py): --lsp
  requests from --clients simulated editor tabs, each with its own documents (opened, typed
  into, edited at random, closed and replaced by new ones, so closed documents must be
  forgotten), each keystroke sending inline completion + completion as VS Code does, with
  code actions, regenerate/stats commands and a few malformed requests mixed in; half of
  the requests are cancelled ($/cancelRequest) while in flight;
- `dllm-lsp engine serve` on a Unix socket: --daemon HTTP requests (infill, completions,
  score, health, a few invalid bodies) from --clients concurrent clients, half of which
  drop the connection mid-request.

Reported: resident memory (VmRSS, not the peak) of both processes after the warm-up
(the first --warmup fraction of the requests) and at the end, with samples in between;
latency p50/p95/max of answered requests, cancelled ones apart; answered/sent. Memory is
"flat" when RSS after the warm-up grows by less than 50 MB by the end (issue 16, defect 8).

Both readings are settled: the load pauses (every request answered), and RSS is read after
--settle seconds, past the engine's idle heap trim (heap_trim.MIN_INTERVAL_S, checked each
second), so both are taken in the same state: idle, trimmed, nothing in flight. Before, the
warm-up reading of the daemon was taken while its other clients were still sending, and
every reading at whatever point the last burst had reached; the growth moved by tens of MB
between runs of the same code (twenty-fourth session: one run in eight over the budget in
each arm). The readings taken at once are reported beside ("unsettled").

    python benchmarks/bench_soak.py [--lsp 10000] [--daemon 2000] [--clients 50] [--results RESULTS.md]
    python benchmarks/bench_soak.py --quick      # a short run: 600 LSP / 200 daemon requests
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import cpu_name  # noqa: E402
from _lsp_wire import WireServer, rss_kb  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from dllm_engine.heap_trim import MIN_INTERVAL_S  # noqa: E402  (torch-free)

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("", "engine", "kernels")),
       "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "DLLM_LSP_MODEL": os.environ.get("DLLM_LSP_MODEL", "small")}
FLAT_MB = 50
BODIES = [  # a Python file's worth of lines the editor tabs type from
    "def add(a, b):\n    return a + b\n", "class Stack:\n    def __init__(self):\n        self.items = []\n",
    "for i in range(10):\n    print(i)\n", "import os\nprint(os.getcwd())\n", "x = [n * n for n in range(5)]\n",
    "def scale(xs, k):\n    out = [x * k for x in xs]\n    return out\n", "with open('f') as fh:\n    data = fh.read()\n",
]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def latency_line(name: str, ms: list[float]) -> str:
    return f"{name}: n={len(ms)} p50={pct(ms, .5):.0f} ms p95={pct(ms, .95):.0f} ms max={max(ms, default=float('nan')):.0f} ms"


# ---------------------------------------------------------------- language server


@dataclass
class Tab:
    """One simulated editor tab: a document this client believes it knows."""

    uri: str
    lines: list[str]
    version: int = 1
    keystrokes: int = 0


@dataclass
class LspRun:
    sent: int = 0
    ids: list = field(default_factory=list)
    cancelled_ids: set = field(default_factory=set)
    rss_kb: list[tuple[int, int]] = field(default_factory=list)  # (requests sent, VmRSS)
    warm_rss_kb: int = 0
    warm_unsettled_kb: int = 0
    warm_cache_mb: float = 0.0


def settled_rss_kb(read, settle_s: float) -> tuple[int, int]:
    """RSS now and once the process has been idle `settle_s` seconds (its heap trimmed: module docstring)."""
    now = read()
    time.sleep(settle_s)
    return now, read()


def drive_lsp(server: WireServer, total: int, clients: int, warmup: int, rng: random.Random, run: LspRun,
              settle_s: float) -> None:
    docs = [0]

    def new_tab() -> Tab:
        docs[0] += 1
        uri = f"file:///soak/tab{docs[0]}.py"
        text = "".join(rng.sample(BODIES, 3))
        server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": text}})
        return Tab(uri, text.split("\n"))

    tabs = [new_tab() for _ in range(clients)]
    cancels: list[tuple[float, int]] = []
    sample_every = max(1, total // 20)
    next_sample = warmup

    def request(method: str, params: dict) -> None:
        msg_id = server.request(method, params)
        run.sent += 1
        run.ids.append(msg_id)
        if rng.random() < 0.5:  # half are cancelled while (most likely) in flight
            cancels.append((time.monotonic() + rng.uniform(0, 0.05), msg_id))
            run.cancelled_ids.add(msg_id)

    while run.sent < total:
        now = time.monotonic()
        for due, msg_id in [c for c in cancels if c[0] <= now]:
            server.cancel(msg_id)
        cancels[:] = [c for c in cancels if c[0] > now]
        while len(server.pending) >= clients:  # at most one request in flight per client on average
            time.sleep(0.002)
            now = time.monotonic()
            for due, msg_id in [c for c in cancels if c[0] <= now]:
                server.cancel(msg_id)
            cancels[:] = [c for c in cancels if c[0] > now]
        i = rng.randrange(clients)
        tab = tabs[i]
        roll = rng.random()
        if tab.keystrokes > 40 and roll < 0.05:  # done with this file: close it, open another
            server.notify("textDocument/didClose", {"textDocument": {"uri": tab.uri}})
            tabs[i] = new_tab()
            continue
        line = len(tab.lines) - 1
        if roll < 0.80:  # a keystroke at the end of the file: didChange, then inline + completion
            ch = rng.choice("abcdefghijklmnopqrstuvwxyz_ =(.:\n")
            tab.version += 1
            tab.keystrokes += 1
            server.notify("textDocument/didChange", {"textDocument": {"uri": tab.uri, "version": tab.version},
                                                     "contentChanges": [{"range": {
                                                         "start": {"line": line, "character": len(tab.lines[line])},
                                                         "end": {"line": line, "character": len(tab.lines[line])}},
                                                         "text": ch}]})
            if ch == "\n":
                tab.lines.append("")
            else:
                tab.lines[line] += ch
            pos = {"line": len(tab.lines) - 1, "character": len(tab.lines[-1])}
            request("textDocument/inlineCompletion", {"textDocument": {"uri": tab.uri}, "position": pos,
                                                      "context": {"triggerKind": 2}})
            request("textDocument/completion", {"textDocument": {"uri": tab.uri}, "position": pos})
        elif roll < 0.88:
            a = rng.randrange(len(tab.lines))
            request("textDocument/codeAction", {"textDocument": {"uri": tab.uri}, "range": {
                "start": {"line": a, "character": 0}, "end": {"line": a, "character": len(tab.lines[a])}},
                "context": {"diagnostics": []}})
        elif roll < 0.92:
            a = rng.randrange(len(tab.lines))
            request("workspace/executeCommand", {"command": "dllm.regenerateSelection", "arguments": [tab.uri, {
                "start": {"line": a, "character": 0}, "end": {"line": a, "character": len(tab.lines[a])}}]})
        elif roll < 0.96:
            request("workspace/executeCommand", {"command": "dllm.serverStats", "arguments": []})
        else:  # malformed: a negative position, an unopened document
            request("textDocument/inlineCompletion", {"textDocument": {"uri": tab.uri}, "position": {
                "line": -1, "character": 0}, "context": {"triggerKind": 1}})
            request("textDocument/completion", {"textDocument": {"uri": "file:///soak/never.py"},
                                                "position": {"line": 0, "character": 0}})
        if run.sent >= next_sample:
            if not run.warm_rss_kb:
                server.wait_answered(list(run.ids), 120)
                run.warm_unsettled_kb, run.warm_rss_kb = settled_rss_kb(server.rss_kb, settle_s)
                health = server.call("workspace/executeCommand", {"command": "dllm.serverStats", "arguments": []},
                                     timeout=60)["result"].get("engineHealth") or {}
                run.warm_cache_mb = round(health.get("cache_bytes", 0) / 2**20, 1)
            run.rss_kb.append((run.sent, server.rss_kb()))
            next_sample += sample_every
    for _, msg_id in cancels:
        server.cancel(msg_id)


def lsp_soak(args, rng: random.Random, out: dict) -> None:
    server = WireServer([sys.executable, "-m", "dllm_lsp", "serve"], env=ENV)
    try:
        server.call("initialize", {"processId": None, "rootUri": None, "initializationOptions": {"debounceMs": 0},
                                   "capabilities": {"window": {"workDoneProgress": True}}})
        server.notify("initialized", {})
        deadline = time.monotonic() + 300
        while not any(n.get("method") == "dllm/status" and n["params"].get("state") == "ready"
                      for n in list(server.notifications)):
            if time.monotonic() > deadline:
                raise RuntimeError("the engine never became ready:\n" + server.stderr_text()[-2000:])
            time.sleep(0.1)
        run = LspRun()
        start = time.perf_counter()
        drive_lsp(server, args.lsp, args.clients, int(args.lsp * args.warmup), rng, run, args.settle)
        missing = server.wait_answered(run.ids, 120)
        elapsed = time.perf_counter() - start
        end_unsettled, end_rss = settled_rss_kb(server.rss_kb, args.settle)
        run.rss_kb.append((run.sent, end_rss))
        stats = server.call("workspace/executeCommand", {"command": "dllm.serverStats", "arguments": []})["result"]
        once = sum(1 for i in run.ids if server.responses[i] == 1)
        answered = [server.latency_s[i] * 1000 for i in run.ids if i in server.latency_s]
        plain = [server.latency_s[i] * 1000 for i in run.ids if i in server.latency_s and i not in run.cancelled_ids]
        out["lsp"] = {
            "sent": run.sent, "answered_once": once, "unanswered": len(missing),
            "answered_twice": sum(1 for i in run.ids if server.responses[i] > 1),
            "context_cache_mb": round((stats.get("engineHealth") or {}).get("cache_bytes", 0) / 2**20, 1),
            "context_cache_warm_mb": run.warm_cache_mb,
            "cancel_sent": len(run.cancelled_ids), "elapsed_s": elapsed,
            "rss_warm_mb": run.warm_rss_kb / 1024, "rss_end_mb": end_rss / 1024,
            "unsettled_growth_mb": round((end_unsettled - run.warm_unsettled_kb) / 1024, 1),
            "rss_samples_mb": [(n, round(kb / 1024, 1)) for n, kb in run.rss_kb],
            "latency_ms": latency_line("all answered", answered), "latency_plain_ms": latency_line("not cancelled", plain),
            "engine_requests": stats["engineRequests"], "engine_cancelled": stats["engineCancelled"],
            "protocol_violations": len(server.violations),
        }
        out["lsp"]["exit"] = server.close()
    finally:
        if server.proc.poll() is None:
            server.proc.kill()


# ---------------------------------------------------------------- daemon


def daemon_body(rng: random.Random) -> tuple[str, str, dict | None]:
    prefix = rng.choice(BODIES) + rng.choice(["def f(x):\n    return ", "total = ", "if x:\n    ", "print("])
    suffix = rng.choice(["", "\n", "\nprint(total)\n"])
    roll = rng.random()
    if roll < 0.45:
        return "POST", "/v1/infill", {"holes": [{"prefix": prefix, "suffix": suffix, "max_tokens": rng.randint(4, 16)}]}
    if roll < 0.75:
        return "POST", "/v1/completions", {"prompt": prefix, "suffix": suffix, "max_tokens": rng.randint(4, 16)}
    if roll < 0.87:
        return "POST", "/v1/score", {"prefix": prefix, "span": "value", "suffix": suffix}
    if roll < 0.95:
        return "GET", "/health", None
    return "POST", "/v1/infill", rng.choice([{"holes": [{"prefix": "x = \ud800"}]}, {"holes": [{"prefix": "x",
                                             "max_tokens": 2.5}]}, {"holes": "nope"}])


async def daemon_clients(socket_path: str, total: int, clients: int, pid: int, warmup: int, seed: int, out: dict,
                         settle_s: float) -> None:
    rng = random.Random(seed)
    plan = [(daemon_body(rng), rng.random() < 0.5, rng.uniform(0.005, 0.2)) for _ in range(total)]
    lat: list[float] = []
    statuses: dict[str, int] = {}
    dropped = 0
    errors: list[str] = []
    samples: list[tuple[int, float]] = []
    done = [0]
    warm = [0]
    warm_cache = [0]
    lock = asyncio.Lock()

    async def client(k: int, first: int, stop: int) -> None:
        nonlocal dropped
        async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=socket_path), base_url="http://engine",
                                     timeout=120) as http:
            for n in range(first + k, stop, clients):
                (method, path, body), drop, after = plan[n]
                content = None if body is None else json.dumps(body)
                t0 = time.perf_counter()
                call = http.request(method, path, content=content, headers={"content-type": "application/json"})
                try:
                    r = await (asyncio.wait_for(call, after) if drop else call)
                    lat.append((time.perf_counter() - t0) * 1000)
                    statuses[str(r.status_code)] = statuses.get(str(r.status_code), 0) + 1
                except asyncio.TimeoutError:
                    dropped += 1  # the client gave up mid-request: its connection is closed
                except httpx.HTTPError as exc:  # the daemon closed the connection without an answer: a finding
                    errors.append(f"{path}: {type(exc).__name__}: {exc}")
                async with lock:
                    done[0] += 1
                    if done[0] % max(1, total // 10) == 0:
                        samples.append((done[0], round(rss_kb(pid) / 1024, 1)))

    async def settled(http: httpx.AsyncClient) -> tuple[int, int, dict]:
        """The daemon's RSS now and once idle past its heap trim (what dropped clients left is gone
        too), and its health then."""
        now = rss_kb(pid)
        await asyncio.sleep(settle_s)
        return now, rss_kb(pid), (await http.get("/health")).json()

    start = time.perf_counter()
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=socket_path), base_url="http://engine") as http:
        await asyncio.gather(*(client(k, 0, warmup) for k in range(clients)))  # the warm-up, then a pause
        warm_unsettled, warm[0], health = await settled(http)
        warm_cache[0] = health.get("cache_bytes", 0)
        await asyncio.gather(*(client(k, warmup, total) for k in range(clients)))
        end_unsettled, end, health = await settled(http)
    out["daemon"] = {
        "sent": total, "answered": len(lat), "dropped_by_client": dropped, "statuses": statuses,
        "transport_errors": len(errors), "transport_error_samples": errors[:5],
        "elapsed_s": time.perf_counter() - start, "rss_warm_mb": warm[0] / 1024, "rss_end_mb": end / 1024,
        "unsettled_growth_mb": round((end_unsettled - warm_unsettled) / 1024, 1),
        "rss_samples_mb": samples, "latency_ms": latency_line("answered", lat),
        "queue_after": health.get("queue_depth"), "active_after": health.get("active_canvases"),
        "context_cache_mb": round(health.get("cache_bytes", 0) / 2**20, 1),
        "context_cache_warm_mb": round(warm_cache[0] / 2**20, 1),
    }


def daemon_soak(args, out: dict) -> None:
    import subprocess

    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        sock = str(Path(tmp) / "engine.sock")
        log = open(Path(tmp) / "daemon.log", "w+")
        proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--socket", sock],
                                env=ENV, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    r = httpx.Client(transport=httpx.HTTPTransport(uds=sock), base_url="http://engine").get("/health")
                    if r.status_code == 200 and r.json().get("status") == "ok":
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError("the daemon did not come up:\n" + log.read()[-2000:])
                time.sleep(0.2)
            asyncio.run(daemon_clients(sock, args.daemon, args.clients, proc.pid, int(args.daemon * args.warmup),
                                       args.seed, out, args.settle))
        finally:
            proc.terminate()
            out.setdefault("daemon", {})["exit"] = proc.wait(30)
            log.seek(0)
            out["daemon"]["log_tail"] = log.read()[-3000:]


# ---------------------------------------------------------------- report


def report(args, out: dict, wall_s: float) -> str:
    lsp, dmn = out["lsp"], out["daemon"]
    growth_lsp = lsp["rss_end_mb"] - lsp["rss_warm_mb"]
    growth_dmn = dmn["rss_end_mb"] - dmn["rss_warm_mb"]
    lines = [
        f"Command: `python benchmarks/bench_soak.py --lsp {args.lsp} --daemon {args.daemon} --clients {args.clients}"
        f" --seed {args.seed} --settle {args.settle:g}` (model {ENV['DLLM_LSP_MODEL']}, OMP_NUM_THREADS={ENV['OMP_NUM_THREADS']}); "
        f"CPU: {cpu_name()}; wall {wall_s:.0f} s.",
        "",
        "| process | sent | answered | RSS after warm-up (settled) | RSS at end (settled) | growth | growth unsettled |"
        " latency (answered) |",
        "|---|---|---|---|---|---|---|---|",
        f"| language server (engine in process) | {lsp['sent']} | {lsp['answered_once']} once"
        f" ({lsp['unanswered']} unanswered, {lsp['answered_twice']} twice) | {lsp['rss_warm_mb']:.0f} MB |"
        f" {lsp['rss_end_mb']:.0f} MB | {growth_lsp:+.1f} MB | {lsp['unsettled_growth_mb']:+.1f} MB | {lsp['latency_ms']} |",
        f"| daemon | {dmn['sent']} | {dmn['answered']} + {dmn['dropped_by_client']} dropped by their client |"
        f" {dmn['rss_warm_mb']:.0f} MB | {dmn['rss_end_mb']:.0f} MB | {growth_dmn:+.1f} MB |"
        f" {dmn['unsettled_growth_mb']:+.1f} MB | {dmn['latency_ms']} |",
        "",
        f"- Language server: {lsp['cancel_sent']} requests cancelled in flight; {lsp['latency_plain_ms']};"
        f" engine calls {lsp['engine_requests']} ({lsp['engine_cancelled']} cancelled in the engine);"
        f" {lsp['protocol_violations']} protocol violations on stdout; exit status {lsp.get('exit')};"
        f" context cache {lsp['context_cache_warm_mb']} MB after warm-up, {lsp['context_cache_mb']} MB at end."
        f" RSS samples (requests sent, MB): {lsp['rss_samples_mb']}.",
        f"- Daemon: HTTP statuses {dmn['statuses']}; {dmn['transport_errors']} connections closed without an answer;"
        f" queue {dmn['queue_after']} / active {dmn['active_after']}"
        f" after the run; context cache {dmn['context_cache_warm_mb']} MB after warm-up, {dmn['context_cache_mb']} MB at end; exit status after SIGTERM {dmn.get('exit')}. RSS samples (requests done, MB):"
        f" {dmn['rss_samples_mb']}.",
        f"- Flat memory (growth after warm-up < {FLAT_MB} MB): language server"
        f" {'yes' if growth_lsp < FLAT_MB else 'NO'}, daemon {'yes' if growth_dmn < FLAT_MB else 'NO'}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lsp", type=int, default=10_000, help="language-server requests")
    p.add_argument("--daemon", type=int, default=2_000, help="daemon HTTP requests")
    p.add_argument("--clients", type=int, default=50, help="concurrent clients (editor tabs; HTTP clients)")
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of the requests before the first RSS reading")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--settle", type=float, default=MIN_INTERVAL_S + 2.5,
                   help="seconds idle before each RSS reading (past the engine's heap trim; module docstring)")
    p.add_argument("--quick", action="store_true", help="a short run: 600 LSP and 200 daemon requests")
    p.add_argument("--results", default=None, help="append the report to this markdown file")
    p.add_argument("--json", default=None, help="write the raw figures here")
    args = p.parse_args(argv)
    if args.quick:
        args.lsp, args.daemon = min(args.lsp, 600), min(args.daemon, 200)
    out: dict = {}
    start = time.perf_counter()
    rng = random.Random(args.seed)
    daemon = threading.Thread(target=daemon_soak, args=(args, out))
    daemon.start()  # both soaks at once: the machine carries both loads, as a user's would
    try:
        lsp_soak(args, rng, out)
    finally:
        daemon.join()
    text = report(args, out, time.perf_counter() - start)
    print(text)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + text + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
