"""The released batch buffer serves the next batch (spare_buffer.py): the same storage, and the
same fills as buffers allocated afresh whatever the kept storage held before."""

import pytest
import torch

from dllm_engine import runner as runner_module
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import Hole, InfillRequest
from dllm_engine.spare_buffer import SpareBuffer


def test_take_reuses_the_kept_storage_when_it_fits():
    spare = SpareBuffer(cap_bytes=1 << 20)
    like = torch.zeros(1, dtype=torch.bfloat16)
    first = spare.take((4, 8, 16), like)
    spare.give(first)
    second = spare.take((2, 8, 16), like)  # smaller: fits
    assert second.data_ptr() == first.data_ptr() and second.shape == (2, 8, 16) and second.is_contiguous()
    assert spare.take((2, 8, 16), like).data_ptr() != first.data_ptr()  # taken: not handed out twice
    spare.give(second)  # the whole storage comes back, not only the view's part
    assert spare.take((4, 8, 16), like).data_ptr() == first.data_ptr()


def test_take_allocates_when_nothing_kept_fits():
    spare = SpareBuffer(cap_bytes=1024)
    like = torch.zeros(1, dtype=torch.bfloat16)
    big = torch.zeros(4096, dtype=torch.bfloat16)
    spare.give(big)  # over the cap: not kept
    assert spare.take((8,), like).data_ptr() != big.data_ptr()
    small = torch.zeros(8, dtype=torch.float32)
    spare.give(small)
    assert spare.take((8,), like).data_ptr() != small.data_ptr()  # another dtype
    spare.give(small)
    assert spare.take((16,), small).data_ptr() != small.data_ptr()  # too small
    with torch.inference_mode():
        inference = torch.zeros(8)
    spare = SpareBuffer(cap_bytes=1024)
    spare.give(inference)
    assert spare.take((8,), small).data_ptr() != inference.data_ptr()  # not writable outside inference mode
    with torch.inference_mode():
        assert spare.take((8,), small).data_ptr() == inference.data_ptr()


HOLES = [Hole(prefix="def f(x):\n" + "    x = x + 1\n" * n + "    return ", suffix="\n\nprint(f(2))\n", max_tokens=8)
         for n in (9, 1, 3, 6)]  # the first the largest: each later batch fits in its buffer


def _fills(model, monkeypatch, cap, poison=False):
    monkeypatch.setattr(runner_module, "SPARE_BUFFER_BYTES", cap)
    e = Engine(EngineConfig(model=str(model), threads=1, dtype="bfloat16", weights="native"))
    try:
        texts = []
        for hole in HOLES:
            if poison:  # whatever the kept storage holds, nothing of it reaches a fill
                def fill_kept():
                    kept = e.runner._spare._kept
                    if kept is not None:
                        with torch.inference_mode(kept.is_inference()):
                            kept.fill_(float("nan"))

                e.between_passes(fill_kept)
            texts.append(e.infill(InfillRequest(holes=[hole]), timeout=60).holes[0].text)
        return texts, e.runner._spare.reused
    finally:
        e.shutdown()


def test_fills_with_a_reused_buffer_are_the_fills_with_fresh_ones(tiny_shifted_model, monkeypatch):
    fresh, none = _fills(tiny_shifted_model, monkeypatch, cap=0)
    reused, count = _fills(tiny_shifted_model, monkeypatch, cap=64 << 20, poison=True)
    assert none == 0 and count >= len(HOLES) - 1  # the engine idles between requests: each new batch reuses
    assert reused == fresh
