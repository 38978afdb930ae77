"""Append new K/V rows into a preallocated per-layer cache, per-request offsets, in one launch.

    k_cache[b, :, start[b] + i] = k_new[b, :, i]     for i < new_lens[b]   (same for v)

Caches are [B, H_kv, T, D] (the layout of canvas_attention); new rows are [B, H_kv, S, D]
(padded to S; new_lens defaults to S). Rows that would land at or past T are dropped, not
wrapped: the engine sizes the cache (checking here would cost a host sync per layer).
"""

from __future__ import annotations

import torch

from dllm_kernels._triton import check_device, require_triton, tl, triton


@triton.jit
def _copy_rows(src_ptr, dst_ptr, ssb, ssh, sss, sdb, sdh, sdt, b, i, t, n_heads, HEAD_D: tl.constexpr, BLOCK_H: tl.constexpr):
    """dst[b, :, t] = src[b, :, i] for every head."""
    heads = tl.arange(0, BLOCK_H)
    d = tl.arange(0, HEAD_D)
    for h0 in range(0, n_heads, BLOCK_H):
        hh = h0 + heads
        mask = (hh < n_heads)[:, None]
        x = tl.load(src_ptr + b * ssb + hh[:, None] * ssh + i * sss + d[None, :], mask=mask)
        tl.store(dst_ptr + b * sdb + hh[:, None] * sdh + t * sdt + d[None, :], x, mask=mask)


@triton.jit
def _kv_append_kernel(
    kn_ptr, vn_ptr, kc_ptr, vc_ptr, start_ptr, nlen_ptr,
    sknb, sknh, skns, svnb, svnh, svns, skcb, skch, skct, svcb, svch, svct,
    S, T, HK,
    HEAD_D: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Grid (B * S,): one new row (all heads, k and v) per program."""
    pid = tl.program_id(0)
    b = (pid // S).to(tl.int64)
    i = (pid % S).to(tl.int64)
    t = tl.load(start_ptr + b).to(tl.int64) + i
    if (i < tl.load(nlen_ptr + b)) & (t < T):
        _copy_rows(kn_ptr, kc_ptr, sknb, sknh, skns, skcb, skch, skct, b, i, t, HK, HEAD_D, BLOCK_H)
        _copy_rows(vn_ptr, vc_ptr, svnb, svnh, svns, svcb, svch, svct, b, i, t, HK, HEAD_D, BLOCK_H)


def _check(k_cache, v_cache, k_new, v_new, start, new_lens):
    op = "kv_append"
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("k_new", k_new), ("v_new", v_new)):
        if t.dim() != 4:
            raise ValueError(f"{op}: {name} must be [B, H_kv, T, D], got {tuple(t.shape)}")
    if k_cache.shape != v_cache.shape or k_new.shape != v_new.shape:
        raise ValueError(f"{op}: k and v shapes differ")
    bsz, heads, _, dim = k_cache.shape
    if k_new.shape[0] != bsz or k_new.shape[1] != heads or k_new.shape[3] != dim:
        raise ValueError(f"{op}: new rows {tuple(k_new.shape)} do not fit cache {tuple(k_cache.shape)}")
    if len({k_cache.dtype, v_cache.dtype, k_new.dtype, v_new.dtype}) != 1:
        raise ValueError(f"{op}: cache and new rows must share one dtype")
    for name, t in (("start", start), ("new_lens", new_lens)):
        if t is not None and (t.shape != (bsz,) or t.dtype not in (torch.int32, torch.int64)):
            raise ValueError(f"{op}: {name} must be an int tensor [{bsz}], got {tuple(t.shape)}/{t.dtype}")


def kv_append_reference(k_cache, v_cache, k_new, v_new, start, new_lens=None):
    """Plain torch, in place on the caches (a scatter along T); returns (k_cache, v_cache)."""
    _check(k_cache, v_cache, k_new, v_new, start, new_lens)
    bsz, heads, T, dim = k_cache.shape
    S = k_new.shape[2]
    dev = k_cache.device
    i = torch.arange(S, device=dev)[None, :]
    n = new_lens.to(dev)[:, None] if new_lens is not None else torch.full((bsz, 1), S, device=dev)
    t = start.to(dev)[:, None] + i  # [B, S]
    keep = (i < n) & (t < T)
    b_idx, i_idx = keep.nonzero(as_tuple=True)
    t_idx = t[b_idx, i_idx]
    for cache, new in ((k_cache, k_new), (v_cache, v_new)):
        cache[b_idx, :, t_idx] = new[b_idx, :, i_idx]
    return k_cache, v_cache


def kv_append_triton(k_cache, v_cache, k_new, v_new, start, new_lens=None):
    """Triton launcher; same contract as `kv_append_reference`."""
    require_triton("kv_append")
    _check(k_cache, v_cache, k_new, v_new, start, new_lens)
    check_device("kv_append", k_cache, v_cache, k_new, v_new, start, new_lens)
    bsz, heads, T, dim = k_cache.shape
    S = k_new.shape[2]
    if dim & (dim - 1):
        raise ValueError(f"kv_append: head_dim must be a power of two, got {dim}")
    if any(t.stride(-1) != 1 for t in (k_cache, v_cache)):
        raise ValueError("kv_append: caches need unit stride along head_dim (written in place)")
    if k_new.stride(-1) != 1 or v_new.stride(-1) != 1:
        k_new, v_new = k_new.contiguous(), v_new.contiguous()
    st = start.to(torch.int32).contiguous()
    nl = (new_lens if new_lens is not None else torch.full((bsz,), S, device=start.device)).to(torch.int32).contiguous()
    if bsz * S == 0:
        return k_cache, v_cache
    _kv_append_kernel[(bsz * S,)](
        k_new, v_new, k_cache, v_cache, st, nl,
        k_new.stride(0), k_new.stride(1), k_new.stride(2), v_new.stride(0), v_new.stride(1), v_new.stride(2),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        S, T, heads,
        HEAD_D=dim, BLOCK_H=min(8, triton.next_power_of_2(heads)), num_warps=4,
    )
    return k_cache, v_cache
