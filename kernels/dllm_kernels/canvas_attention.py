"""Attention of canvas queries over [cached context ++ canvas], and the causal prefill path.

Cache layout (shared with the engine): per layer, context K and V are [B, H_kv, T, D]
(padded to T; request b owns rows [0, context_lens[b])); canvas q is [B, H, L, D] and
canvas k/v are [B, H_kv, L, D]. Query head h reads KV head h // (H / H_kv) (GQA, the
Llama/Qwen `repeat_kv` grouping).

    canvas:  o[b,h,i] = softmax_j(scale * q[b,h,i] . k[j]) v[j]
             j over context rows < context_lens[b], then canvas rows < canvas_lens[b]
             (non-causal: every canvas token sees the whole canvas)
    prefill: query i of request b sits at cache position q_start[b] + i and sees cache
             rows j < kv_lens[b] with j <= q_start[b] + i (causal)

Both run one kernel: a flash-attention forward (online softmax in base 2) over up to two
key segments. One program owns BLOCK_M queries of one (b, h); a row that sees no key at
all returns zeros. When that grid is too small to fill the GPU (batch 1, a short canvas),
the context is split across programs and the partial softmaxes are merged by a second
small kernel (flash-decoding).
"""

from __future__ import annotations

import functools

import torch

from dllm_kernels._triton import check_device, require_triton, tl, triton

LOG2E = 1.4426950408889634  # 1/ln 2: softmax in base 2 uses exp2, cheaper than exp
_HEAD_DIMS = (16, 32, 64, 128, 256)


@triton.jit
def _attn_segment(
    acc, m_i, l_i, q, k_base, v_base, stride_kt, stride_vt, lo, hi, q_pos, qk_scale,
    CAUSAL: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_F32: tl.constexpr, PRECISION: tl.constexpr,
):
    """Fold keys [lo, hi) of one segment into the running (acc, m_i, l_i)."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    for start in range(lo, hi, BLOCK_N):
        kn = start + offs_n
        kmask = kn < hi
        # -- load K transposed [D, N] and V [N, D]: streamed from HBM once per program --
        k = tl.load(k_base + kn[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
        v = tl.load(v_base + kn[:, None] * stride_vt + offs_d[None, :], mask=kmask[:, None], other=0.0)
        if DOT_F32:
            qk = tl.dot(q, k.to(tl.float32), input_precision=PRECISION)
        else:
            qk = tl.dot(q, k)
        qk = qk * qk_scale
        visible = kmask[None, :]
        if CAUSAL:
            visible = visible & (kn[None, :] <= q_pos[:, None])
        qk = tl.where(visible, qk, float("-inf"))
        # -- online softmax: rescale what came before to the new row max --
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing visible yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        if DOT_F32:
            acc += tl.dot(p, v.to(tl.float32), input_precision=PRECISION)
        else:
            acc += tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _attn_fwd_kernel(
    q_ptr, k1_ptr, v1_ptr, k2_ptr, v2_ptr, o_ptr, len1_ptr, len2_ptr, qstart_ptr, pacc_ptr, pm_ptr, pl_ptr,
    sqb, sqh, sqm, sk1b, sk1h, sk1t, sv1b, sv1h, sv1t,
    sk2b, sk2h, sk2t, sv2b, sv2h, sv2t, sob, soh, som,
    H, GROUP, M, qk_scale, NUM_SPLITS,
    CAUSAL: tl.constexpr, HAS_SEG2: tl.constexpr, SPLIT: tl.constexpr, HEAD_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (cdiv(M, BLOCK_M), B * H, NUM_SPLITS). Segment 1: context (or the cache, causal); 2: canvas.

    With SPLIT, split s folds only its slice of the context (the last split also the canvas)
    and writes unnormalised (acc, m, l) for `_attn_combine_kernel` (flash-decoding).
    """
    tl.static_assert(BLOCK_M >= 16)  # tl.dot needs every dim >= 16
    tl.static_assert(BLOCK_N >= 16)
    tl.static_assert(HEAD_D >= 16)
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    # -- load the query block: stays in registers for every key block --
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :], mask=offs_m[:, None] < M, other=0.0)
    if DOT_F32:
        q = q.to(tl.float32)
    n1 = tl.load(len1_ptr + b)
    if CAUSAL:
        q0 = tl.load(qstart_ptr + b)
        q_pos = q0 + offs_m
        n1 = tl.minimum(n1, q0 + (pid_m + 1) * BLOCK_M)  # keys past the block's last query are all hidden
    else:
        q_pos = offs_m
    lo = 0
    if SPLIT:  # this split's slice of the context, whole key blocks
        pid_s = tl.program_id(2)
        chunk = tl.cdiv(tl.cdiv(n1, NUM_SPLITS), BLOCK_N) * BLOCK_N
        lo = tl.minimum(pid_s * chunk, n1)
        n1 = tl.minimum(lo + chunk, n1)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    acc, m_i, l_i = _attn_segment(
        acc, m_i, l_i, q, k1_ptr + b * sk1b + hk * sk1h, v1_ptr + b * sv1b + hk * sv1h, sk1t, sv1t,
        lo, n1, q_pos, qk_scale, CAUSAL, HEAD_D, BLOCK_N, DOT_F32, PRECISION,
    )
    if HAS_SEG2:
        n2 = tl.load(len2_ptr + b)
        if SPLIT:
            n2 = tl.where(pid_s == NUM_SPLITS - 1, n2, 0)
        acc, m_i, l_i = _attn_segment(
            acc, m_i, l_i, q, k2_ptr + b * sk2b + hk * sk2h, v2_ptr + b * sv2b + hk * sv2h, sk2t, sv2t,
            0, n2, q_pos, qk_scale, False, HEAD_D, BLOCK_N, DOT_F32, PRECISION,
        )
    row_ok = offs_m < M
    if SPLIT:
        # -- partials [NUM_SPLITS, B*H, M] (+ D): float32, combined by _attn_combine_kernel --
        prow = (pid_s * tl.num_programs(1) + bh).to(tl.int64) * M + offs_m
        tl.store(pm_ptr + prow, m_i, mask=row_ok)
        tl.store(pl_ptr + prow, l_i, mask=row_ok)
        tl.store(pacc_ptr + prow[:, None] * HEAD_D + offs_d[None, :], acc, mask=row_ok[:, None])
    else:
        # -- normalise; rows that saw no key keep acc = 0 --
        o = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :], o.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _attn_combine_kernel(
    pacc_ptr, pm_ptr, pl_ptr, o_ptr, sob, soh, som, H, M, NUM_SPLITS,
    HEAD_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """o = sum_s 2^(m_s - m) acc_s / sum_s 2^(m_s - m) l_s, m = max_s m_s. Grid (B * H * M,)."""
    row = tl.program_id(0).to(tl.int64)  # = bh * M + i
    rows = tl.num_programs(0).to(tl.int64)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_D)
    smask = offs_s < NUM_SPLITS
    m = tl.load(pm_ptr + offs_s * rows + row, mask=smask, other=float("-inf"))
    l = tl.load(pl_ptr + offs_s * rows + row, mask=smask, other=0.0)
    acc = tl.load(pacc_ptr + (offs_s[:, None] * rows + row) * HEAD_D + offs_d[None, :], mask=smask[:, None], other=0.0)
    m_max = tl.max(m, axis=0)
    w = tl.exp2(m - tl.where(m_max == float("-inf"), 0.0, m_max))  # splits that saw nothing weigh 0
    den = tl.sum(w * l, axis=0)
    o = tl.sum(w[:, None] * acc, axis=0) / tl.where(den == 0.0, 1.0, den)
    bh = row // M
    i = row % M
    tl.store(o_ptr + (bh // H) * sob + (bh % H) * soh + i * som + offs_d, o.to(o_ptr.dtype.element_ty))


# ----------------------------------------------------------------------------- references


def _sdpa_masked(q, k, v, mask, scale):
    """float32 SDPA (GQA via enable_gqa) with a bool mask [B, 1, M, N]; rows that see no key -> 0."""
    dtype = q.dtype
    q, k, v = q.float(), k.float(), v.float()
    gqa = dict(enable_gqa=True) if q.shape[1] != k.shape[1] else {}
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, **gqa)
    return torch.where(mask.any(-1, keepdim=True), out, 0.0).to(dtype)


def canvas_attention_reference(q, k_ctx, v_ctx, context_lens, k_canvas, v_canvas, scale, canvas_lens=None):
    """torch SDPA over [context ++ canvas] with an explicit boolean mask."""
    bsz, _, L, _ = q.shape
    T = k_ctx.shape[2]
    dev = q.device
    ctx_visible = torch.arange(T, device=dev)[None, :] < context_lens.to(dev)[:, None]  # [B, T]
    cl = canvas_lens if canvas_lens is not None else torch.full((bsz,), L, device=dev)
    canvas_visible = torch.arange(L, device=dev)[None, :] < cl.to(dev)[:, None]  # [B, L]
    mask = torch.cat((ctx_visible, canvas_visible), dim=1)[:, None, None, :].expand(bsz, 1, L, T + L)
    k = torch.cat((k_ctx, k_canvas), dim=2)
    v = torch.cat((v_ctx, v_canvas), dim=2)
    return _sdpa_masked(q, k, v, mask, scale)


def context_attention_reference(q, k_cache, v_cache, q_start, kv_lens, scale):
    """Causal prefill: query i of request b at position q_start[b] + i over cache rows < kv_lens[b]."""
    S, T = q.shape[2], k_cache.shape[2]
    dev = q.device
    pos = q_start.to(dev)[:, None] + torch.arange(S, device=dev)[None, :]  # [B, S]
    j = torch.arange(T, device=dev)
    mask = (j[None, None, :] <= pos[:, :, None]) & (j[None, None, :] < kv_lens.to(dev)[:, None, None])
    return _sdpa_masked(q, k_cache, v_cache, mask[:, None], scale)


# ----------------------------------------------------------------------------- launchers


def _check_qkv(op, q, pairs):
    if q.dim() != 4:
        raise ValueError(f"{op}: q must be [B, H, L, D], got {tuple(q.shape)}")
    bsz, heads, _, dim = q.shape
    if dim not in _HEAD_DIMS:
        raise ValueError(f"{op}: head_dim {dim} not supported (one of {_HEAD_DIMS})")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{op}: dtype {q.dtype} not supported")
    kv_heads = None
    for name, k, v in pairs:
        if k.dim() != 4 or k.shape != v.shape:
            raise ValueError(f"{op}: {name} k {tuple(k.shape)} and v {tuple(v.shape)} must be equal [B, H_kv, T, D]")
        if k.shape[0] != bsz or k.shape[3] != dim or k.dtype != q.dtype or v.dtype != q.dtype:
            raise ValueError(f"{op}: {name} k/v {tuple(k.shape)}/{k.dtype} do not match q {tuple(q.shape)}/{q.dtype}")
        if kv_heads is not None and k.shape[1] != kv_heads:
            raise ValueError(f"{op}: every k/v needs the same number of KV heads")
        kv_heads = k.shape[1]
        if k.stride(-1) != 1 or v.stride(-1) != 1:
            raise ValueError(f"{op}: {name} k/v need unit stride along head_dim")
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"{op}: {heads} query heads is not a multiple of {kv_heads} KV heads")
    return heads // kv_heads


def _lens(op, name, t, bsz, device):
    if t is None:
        return None
    if t.shape != (bsz,) or t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{op}: {name} must be an int tensor [{bsz}], got {tuple(t.shape)}/{t.dtype}")
    return t.to(device=device, dtype=torch.int32).contiguous()


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _num_splits(q, programs: int, keys: int, block_n: int) -> int:
    """Split the context when the grid would leave most SMs idle (small batch, short canvas)."""
    if q.device.type != "cuda":
        return 1
    sms = _sm_count(q.device.index if q.device.index is not None else torch.cuda.current_device())
    if programs >= sms:
        return 1
    # enough programs to fill the SMs twice, but at least 4 key blocks per split
    return max(1, min(16, triton.cdiv(2 * sms, programs), keys // (4 * block_n)))


def _launch(q, k1, v1, k2, v2, len1, len2, qstart, scale, causal, group, block_m, block_n, num_splits=None):
    bsz, heads, M, dim = q.shape
    if q.stride(-1) != 1:
        q = q.contiguous()
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if bsz * heads * M == 0:
        return o
    # CPU tensors only run under the Triton interpreter, whose bfloat16 tl.dot is wrong (triton 3.9):
    # there, and for float32 inputs, the dots run in float32 ("ieee": no TF32 rounding).
    dot_f32 = q.device.type == "cpu" or q.dtype == torch.float32
    block_m = block_m or max(16, min(64, triton.next_power_of_2(M)))
    block_n = block_n or (32 if dim >= 256 else 64)  # K and V tiles of 64 x 128 bf16: 16 KiB each
    has2 = k2 is not None
    k2_, v2_ = (k2, v2) if has2 else (k1, v1)
    dummy = len1
    grid_mh = triton.cdiv(M, block_m) * bsz * heads
    splits = 1 if causal else num_splits or _num_splits(q, grid_mh, k1.shape[2], block_n)
    if splits > 1:
        pm = torch.empty((splits, bsz * heads, M), dtype=torch.float32, device=q.device)
        pl = torch.empty_like(pm)
        pacc = torch.empty((splits, bsz * heads, M, dim), dtype=torch.float32, device=q.device)
    else:
        pm = pl = pacc = o  # unused
    grid = (triton.cdiv(M, block_m), bsz * heads, splits)
    _attn_fwd_kernel[grid](
        q, k1, v1, k2_, v2_, o, len1, len2 if has2 else dummy, qstart if causal else dummy, pacc, pm, pl,
        q.stride(0), q.stride(1), q.stride(2), k1.stride(0), k1.stride(1), k1.stride(2),
        v1.stride(0), v1.stride(1), v1.stride(2), k2_.stride(0), k2_.stride(1), k2_.stride(2),
        v2_.stride(0), v2_.stride(1), v2_.stride(2), o.stride(0), o.stride(1), o.stride(2),
        heads, group, M, float(scale) * LOG2E, splits,
        CAUSAL=causal, HAS_SEG2=has2, SPLIT=splits > 1, HEAD_D=dim, BLOCK_M=block_m, BLOCK_N=block_n,
        DOT_F32=dot_f32, PRECISION="ieee",
        # a short canvas gives small query blocks: 4 warps; full 64-row blocks of D=128: 8
        num_warps=4 if block_m <= 32 or dim <= 64 else 8, num_stages=3 if dim <= 128 else 2,
    )
    if splits > 1:
        _attn_combine_kernel[(bsz * heads * M,)](
            pacc, pm, pl, o, o.stride(0), o.stride(1), o.stride(2), heads, M, splits,
            HEAD_D=dim, BLOCK_S=triton.next_power_of_2(splits), num_warps=4,
        )
    return o


def canvas_attention_triton(
    q, k_ctx, v_ctx, context_lens, k_canvas, v_canvas, scale, canvas_lens=None, block_m=None, block_n=None,
    num_splits=None,
):
    """Triton launcher; same contract as `canvas_attention_reference`. Returns [B, H, L, D]."""
    op = "canvas_attention"
    require_triton(op)
    group = _check_qkv(op, q, (("context", k_ctx, v_ctx), ("canvas", k_canvas, v_canvas)))
    bsz, _, L, _ = q.shape
    if k_canvas.shape[2] != L:
        raise ValueError(f"{op}: canvas k/v have {k_canvas.shape[2]} rows for {L} canvas queries")
    check_device(op, q, k_ctx, v_ctx, k_canvas, v_canvas, context_lens)
    len1 = _lens(op, "context_lens", context_lens, bsz, q.device)
    len2 = _lens(op, "canvas_lens", canvas_lens, bsz, q.device)
    if len2 is None:
        len2 = torch.full((bsz,), L, dtype=torch.int32, device=q.device)
    if k_ctx.shape[2] == 0:  # no context at all: the canvas is the only segment
        return _launch(q, k_canvas, v_canvas, None, None, len2, None, None, scale, False, group, block_m, block_n)
    return _launch(q, k_ctx, v_ctx, k_canvas, v_canvas, len1, len2, None, scale, False, group, block_m, block_n, num_splits)


def context_attention_triton(q, k_cache, v_cache, q_start, kv_lens, scale, block_m=None, block_n=None):
    """Triton launcher; same contract as `context_attention_reference`. Returns [B, H, S, D]."""
    op = "context_attention"
    require_triton(op)
    group = _check_qkv(op, q, (("cache", k_cache, v_cache),))
    bsz = q.shape[0]
    check_device(op, q, k_cache, v_cache, q_start, kv_lens)
    qs = _lens(op, "q_start", q_start, bsz, q.device)
    kl = _lens(op, "kv_lens", kv_lens, bsz, q.device)
    return _launch(q, k_cache, v_cache, None, None, kl, None, qs, scale, True, group, block_m, block_n)
