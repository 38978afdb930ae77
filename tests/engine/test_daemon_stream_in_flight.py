"""A streamed answer keeps its request counted in flight until its last byte is written (or its
client is gone): the count went to zero as soon as the handler returned the stream, so a
daemon started with `--idle-exit` could exit in the middle of one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dllm_engine.daemon import EngineHost, build_app

sys.path.insert(0, str(Path(__file__).parents[1] / "lsp"))  # as tests/editors does
from loopback_server import LoopbackServer  # noqa: E402

# One token settles per pass (no confidence reaches 2): a stream of many passes. (Chat streams
# the same way as completions, on checkpoints with a chat template: the small model has none.)
ONE_TOKEN_PER_PASS = {"threshold": 2.0}
WATCH_S = 4.0
STREAMS = {
    "/v1/infill": {"holes": [{"prefix": "def f(x):\n    ", "suffix": "\n", "max_tokens": 64}],
                   "params": ONE_TOKEN_PER_PASS, "stream": True},
    "/v1/completions": {"prompt": "def f(x):\n    ", "suffix": "\n", "max_tokens": 64, "stream": True},
}


@pytest.fixture(scope="module")
def served(default_engine):
    """The daemon's app on the real small model, in this process so its count can be read."""
    host = EngineHost(lambda: default_engine)
    host.engine = default_engine
    with LoopbackServer(build_app(host), "the daemon's app") as server:
        yield host, server.url


def _settles_to(host: EngineHost, count: int) -> bool:
    deadline = time.monotonic() + 30
    while host.in_flight != count and time.monotonic() < deadline:
        time.sleep(0.02)
    return host.in_flight == count


@pytest.mark.parametrize("route", sorted(STREAMS))
def test_a_stream_counts_until_its_client_is_gone(served, route):
    host, url = served
    with httpx.Client(base_url=url, timeout=60) as http:
        with http.stream("POST", route, json=STREAMS[route]) as r:
            assert r.status_code == 200
            # The headers are out, so the handler has returned; the stream has passes to go.
            assert host.in_flight == 1
        # The client went away mid-stream: the count drops once the daemon notices.
        assert _settles_to(host, 0), host.in_flight


def test_a_stream_read_to_its_end_is_counted_once(served):
    host, url = served
    body = {**STREAMS["/v1/infill"], "holes": [{"prefix": "x = ", "max_tokens": 4}]}
    with httpx.Client(base_url=url, timeout=60) as http:
        with http.stream("POST", "/v1/infill", json=body) as r:
            events = [line for line in r.iter_lines() if line.startswith("event:")]
    assert events[-1] == "event: result"
    assert _settles_to(host, 0), host.in_flight


def test_an_idle_exit_waits_for_a_stream_to_end(tmp_path):
    """A daemon that exits after 1 s idle, and a stream of many passes on the small model: read
    for WATCH_S, well past the time the daemon used to leave (its idle check runs every 0.5 s,
    then 1 s of grace for open requests), the stream is still being served (or has ended with
    its result); once its client is gone, the daemon exits as usual."""
    sock = tmp_path / "run" / "engine.sock"
    proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--socket", str(sock),
                             "--idle-exit", "1", "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        http = httpx.Client(base_url="http://e", transport=httpx.HTTPTransport(uds=str(sock)), timeout=60)
        deadline = time.monotonic() + 60
        while True:  # the idle clock starts when the model is in: send the stream right then
            try:
                if http.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.05)
        body = {**STREAMS["/v1/infill"], "holes": [{"prefix": "def f(x):\n    ", "max_tokens": 256}]}
        events, ended, start = [], "closed", time.monotonic()
        with http.stream("POST", "/v1/infill", json=body) as r:
            # Cut mid-stream, the daemon's exit shows as a RemoteProtocolError or an end without a result.
            for line in r.iter_lines():
                if line.startswith("event:"):
                    events.append(line)
                if line == "event: result":
                    ended = "result"
                elif time.monotonic() - start > WATCH_S:
                    ended = "watched"
                if ended != "closed":
                    break
        http.close()
        assert set(events) <= {"event: canvas", "event: result"}, events[-3:]
        assert ended == "result" or (ended == "watched" and proc.poll() is None), \
            f"the daemon left {time.monotonic() - start:.1f} s into the stream, after {len(events)} events"
        assert proc.wait(30) == 0  # and it still exits once idle
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
