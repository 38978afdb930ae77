"""The batch buffer last let go, kept for the next batch: no fresh allocation per request.

Why: a decoding batch stacks its contexts' K/V into one buffer with room for the canvas
(runner._stack_contexts): for the default model and a context of a thousand tokens that is
30 layers x K and V x 3 heads x 1,280 rows x 64 in bf16, 29 MB. The engine lets its batches
go when it falls idle, and every request is a new batch, so every keystroke's request
allocated one afresh; glibc maps a block that size from the OS and unmaps it on free, so
each allocation page-faulted all of its pages and was then zeroed whole: ~50 ms a request on
a 2-core CPU (torch's profiler, benchmarks/RESULTS.md, eleventh session), before its first
pass. One released buffer (at most `cap_bytes`) is kept, and the next batch whose buffer
fits in it takes its storage.
"""

from __future__ import annotations

import math

import torch


class SpareBuffer:
    def __init__(self, cap_bytes: int) -> None:
        self.cap_bytes = cap_bytes
        self._kept: torch.Tensor | None = None  # any tensor viewing the kept storage
        self.reused = 0

    def give(self, buf: torch.Tensor) -> None:
        """`buf`, which nothing will read or write again, is kept if it is the largest yet
        under the cap."""
        size = buf.untyped_storage().nbytes()
        if size <= self.cap_bytes and (self._kept is None or size > self._kept.untyped_storage().nbytes()):
            self._kept = buf

    def take(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """A contiguous tensor of `shape` with `like`'s dtype and device: the kept storage
        when it fits (its contents are whatever it held: the caller writes every element it
        reads), else a new one, uninitialised either way."""
        kept, need = self._kept, math.prod(shape) * like.element_size()
        if (kept is not None and kept.dtype == like.dtype and kept.device == like.device
                and kept.untyped_storage().nbytes() >= need
                # an inference tensor can only be written inside inference mode: keep modes apart
                and kept.is_inference() == torch.is_inference_mode_enabled()):
            self._kept = None
            self.reused += 1
            out = kept.new_empty(0)
            return out.set_(kept.untyped_storage(), 0, shape, _contiguous_strides(shape))
        return like.new_empty(shape)

    def clear(self) -> None:
        self._kept = None


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))
