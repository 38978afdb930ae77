"""Bounded query and key lengths for the CPU's half-precision attention: flat memory over a long session.

Why: torch's CPU flash attention (what `F.scaled_dot_product_attention` runs for bf16/fp16 on
a CPU) multiplies its blocks with oneDNN brgemm kernels, generated for each block shape and kept
for good in a per-thread cache without a bound (`at::native::cpublas::KernelCache`: a
`static thread_local` map keyed by M, N, K and the leading dimensions). A block's shape is set
by the tails of the query length (modulo 32/64/256) and of the key length (modulo 512), so every
new context length is new kernels: in the language server's soak, heaptrack showed oneDNN
memory under SDPA growing +11 MB (and the cache's own entries +3 MB) between 1,200 and 4,000
requests, with no end in sight (benchmarks/RESULTS.md, issue 16 defect 8, eighth session).

The fix, as row_buckets.py does for the projections: pad the queries and the keys to the
same ladder of buckets (every length up to EXACT_ROWS, then STEPS_PER_OCTAVE per power of
two), mask the padded keys out and drop the padded queries' output. A padded key gets zero
weight (its score is -inf), so each real query's result is the same attention; only the
blocking, and so the last bf16 bit, can differ. fp32 and CUDA pass through untouched.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .row_buckets import bucket_rows


def pad_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                  keys: int | None = None, padded_mask: torch.Tensor | None = None):
    """q [B, H, S, D], k/v [B, Hkv, T, D], mask [B|1, 1, S|1, T] bool (True = may attend) or
    additive (0 / -inf), or None. Returns (q, k, v, mask) with S and T padded to their buckets
    (the same tensors when both already are one); the caller keeps the first S query rows.

    `keys`: k/v are a preallocated buffer whose first `keys` rows are the keys (T = keys)
    and whose rows after them hold finite values (zeros, or an earlier pass's rows); the
    padded keys are then the buffer's own next rows, a view, instead of a copy of every key
    (a decoding pass over a cached context of a thousand tokens copied ~0.8 MB a layer).

    `padded_mask`: bucket_mask(mask, S, T) made already (every layer of a forward pads the
    same mask: ops.attention makes it once a forward)."""
    s, t = q.shape[-2], keys if keys is not None else k.shape[-2]
    s_pad, t_pad = bucket_rows(s) - s, bucket_rows(t) - t
    # Masked keys get zero weight, but a NaN or inf in their values would still make the
    # weighted sum NaN: a buffer's spare rows never are (runner._stack_contexts zeroes them).
    in_buffer = keys is not None and k.shape[-2] >= t + t_pad
    if keys is not None:
        k, v = k[:, :, : t + t_pad if in_buffer else t], v[:, :, : t + t_pad if in_buffer else t]
    if not s_pad and not t_pad:
        return q, k, v, mask
    mask = bucket_mask(mask, s, t, q.device) if padded_mask is None else padded_mask
    if t_pad and not in_buffer:
        k, v = F.pad(k, (0, 0, 0, t_pad)), F.pad(v, (0, 0, 0, t_pad))
    if s_pad:
        q = F.pad(q, (0, 0, 0, s_pad))
    return q, k, v, mask


def bucket_mask(mask: torch.Tensor | None, s: int, t: int, device) -> torch.Tensor | None:
    """`mask` ([B|1, 1, S|1, T], or None) for S queries and T keys padded to their buckets:
    padded keys shut, padded queries attending like the last real one (never to no key at
    all: a fully masked row is NaN in some kernels; their output is dropped). The mask itself
    where neither length is padded."""
    s_pad, t_pad = bucket_rows(s) - s, bucket_rows(t) - t
    if not s_pad and not t_pad:
        return mask
    if mask is None:  # every key may be attended to: only the padded keys may not
        mask = torch.ones(1, 1, 1, t, dtype=torch.bool, device=device)
    if s_pad and mask.shape[-2] != 1:
        mask = torch.cat((mask, mask[..., -1:, :].expand(*mask.shape[:-2], s_pad, t)), dim=-2)
    if t_pad:
        shut = False if mask.dtype == torch.bool else float("-inf")
        mask = F.pad(mask, (0, t_pad), value=shut)
    return mask
