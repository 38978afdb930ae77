"""Bounded row counts for the CPU's half-precision projections: flat memory over a long session.

Why: torch's bf16 (and fp16) `F.linear` on a CPU runs through oneDNN, which builds a kernel
for each distinct (rows, in, out) it meets and keeps it, with its buffers, for good: about
0.75 MB per new row count for one [m, 256] x [256, 704] projection (benchmarks/RESULTS.md,
issue 16 defect 8). Every keystroke's context tail, batch of canvases and set of rows that
need logits is a new row count, so a language server grew by hundreds of MB over a day's
typing. fp32 and CUDA do not keep per-shape state this way and pass through untouched.

The fix: the rows of such a projection are zero-padded to the next bucket of a fixed ladder
(every count up to EXACT_ROWS, then STEPS_PER_OCTAVE buckets per power of two), so that the
set of shapes, and with it oneDNN's memory, is bounded whatever the traffic. The padded rows
cost FLOPs (at most 1 / STEPS_PER_OCTAVE more, none below EXACT_ROWS, where a pass's few rows
live), and their outputs are dropped. A row's result can differ in its last bf16 bit from the
unpadded call (oneDNN picks its kernel, and so its summation order, by shape); it is the same
computation, and fp32 is untouched.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

EXACT_ROWS = 16  # every row count up to here is its own bucket (a denoising pass's rows)
STEPS_PER_OCTAVE = 4  # buckets per power of two above EXACT_ROWS: at most 25% padded rows
_PADDED_DTYPES = (torch.bfloat16, torch.float16)


def bucket_rows(rows: int) -> int:
    """The smallest bucket holding `rows`: `rows` itself up to EXACT_ROWS, then a multiple of
    octave / STEPS_PER_OCTAVE, where octave is the largest power of two below `rows`."""
    if rows <= EXACT_ROWS:
        return rows
    step = (1 << ((rows - 1).bit_length() - 1)) // STEPS_PER_OCTAVE
    return -(-rows // step) * step


def needs_buckets(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype in _PADDED_DTYPES


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias), with x's rows (all but its last dim, flattened) padded to a
    bucket where oneDNN would keep a kernel per row count."""
    if not needs_buckets(x):
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])
    rows = flat.shape[0]
    bucket = bucket_rows(rows)
    if bucket == rows:
        return F.linear(x, weight, bias)
    padded = flat.new_zeros(bucket, flat.shape[1])
    padded[:rows] = flat
    return F.linear(padded, weight, bias)[:rows].reshape(*x.shape[:-1], weight.shape[0])


class BucketedLinear(nn.Linear):
    """nn.Linear whose forward pads its rows to a bucket (same parameters, same state_dict)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def bucket_linears(model: nn.Module) -> int:
    """In place, for inference: every plain nn.Linear of `model` pads its rows to a bucket
    (the class is swapped; parameters, hooks and state_dict stay). Returns how many."""
    count = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = BucketedLinear
            count += 1
    return count
