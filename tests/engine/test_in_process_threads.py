"""Flat memory (issue 16, defect 8): the in-process engine runs scoring on one thread, not on
asyncio's worker pool.

torch's CPU kernels keep state per thread (flash attention's brgemm kernel cache, MKL's and
oneDNN's scratch buffers): every worker thread that ever ran a score held its own copy, so the
language server (scoring for diagnostics) kept up to cpu_count + 4 of them. Checked directly:
concurrent scores, the way diagnostics of several documents arrive, all run on one thread.
"""

import asyncio
import threading

from dllm_engine.clients import InProcessClient
from dllm_engine.protocol import ScoreRequest


def test_concurrent_scores_run_on_one_thread():
    client = InProcessClient(threads=1)  # the small model (tests/conftest.py)
    threads: set[str] = set()

    async def run() -> list:
        engine = await client._get_engine()
        real = engine.score

        def recording(request):
            threads.add(threading.current_thread().name)
            return real(request)

        engine.score = recording
        try:
            return await asyncio.gather(*(client.score(ScoreRequest(prefix=f"x{i} = ", span="y + 1", suffix="\n"))
                                          for i in range(6)))
        finally:
            await client.close()

    results = asyncio.run(run())
    assert len(results) == 6 and all(r.tokens for r in results)
    assert len(threads) == 1, threads
    assert threads != {threading.current_thread().name}  # off the event loop's thread
