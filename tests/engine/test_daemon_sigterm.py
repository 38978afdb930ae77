"""SIGTERM stops the daemon within a second or two, cleanly: exit status 0, socket removed (issue 16, defect 4).

With a request in flight (a 512-pass canvas), uvicorn once waited for it to finish
and the engine thread was joined for up to 10 s more.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import httpx


def test_sigterm_with_a_request_in_flight(tiny_model, tmp_path):
    sock = tmp_path / "run" / "engine.sock"
    log = open(tmp_path / "daemon.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--socket", str(sock),
                             "--model", str(tiny_model), "--threads", "1"], stdout=log, stderr=log)
    try:
        client = httpx.Client(base_url="http://e", transport=httpx.HTTPTransport(uds=str(sock)), timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        slow = {"holes": [{"prefix": "x = ", "max_tokens": 512, "bucket": 512}], "params": {"threshold": 1.5}}
        threading.Thread(target=lambda: _swallow(client.post, "/v1/infill", json=slow), daemon=True).start()
        while client.get("/metrics").json()["active_canvases"] == 0:
            time.sleep(0.05)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(15)
        took = time.monotonic() - start
    finally:
        proc.kill()
        log.close()
    assert code == 0, (tmp_path / "daemon.log").read_text()
    assert took < 3.0, f"took {took:.1f}s to stop"
    assert not sock.exists()


def _swallow(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except httpx.HTTPError:
        pass
