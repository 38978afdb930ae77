"""Calls onto the engine thread: background work waits for the engine to go idle, within a patience."""

from __future__ import annotations

import threading
import time

from dllm_engine.engine_calls import EngineCalls


def test_background_work_waits_for_idle_or_its_patience():
    calls = EngineCalls(threading.Condition())
    stop = threading.Event()

    def owner() -> None:  # the engine loop's part: queued calls served between "passes"
        while not stop.is_set():
            calls.run_pending()
            time.sleep(0.001)

    thread = threading.Thread(target=owner)
    calls.owner = thread
    thread.start()
    try:
        busy = [True]
        threading.Timer(0.2, lambda: busy.__setitem__(0, False)).start()
        t0 = time.monotonic()
        assert calls.call_when_idle(lambda: time.monotonic() - t0, lambda: not busy[0], 5.0) >= 0.2
        busy[0] = True  # busy for good: it runs anyway once its patience is spent
        t0 = time.monotonic()
        assert calls.call_when_idle(lambda: "ran", lambda: not busy[0], 0.1) == "ran"
        assert time.monotonic() - t0 >= 0.1
        assert calls.call_when_idle(lambda: "at once", lambda: True, 5.0) == "at once"
    finally:
        stop.set()
        thread.join()
