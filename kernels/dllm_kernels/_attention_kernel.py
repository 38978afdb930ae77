"""The flash-attention forward shared by canvas_attention and context_attention.

One program owns BLOCK_M queries of one (batch, query head) and folds up to two key
segments into an online softmax (base 2): segment 1 is the context cache (causal for
prefill), segment 2 the canvas (non-causal). Query head h reads KV head h // (H / H_kv)
(GQA, the Llama/Qwen `repeat_kv` grouping). A row that sees no key returns zeros. When
that grid is too small to fill the GPU (batch 1, a short canvas), the context is split
across programs and a second small kernel merges the partial softmaxes (flash-decoding).

Layout: q [B, H, M, D]; k/v [B, H_kv, T, D], any strides with unit stride along D.
"""

from __future__ import annotations

import functools

import torch

from dllm_kernels._triton import tl, triton

LOG2E = 1.4426950408889634  # 1/ln 2: softmax in base 2 uses exp2, cheaper than exp
HEAD_DIMS = (16, 32, 64, 128, 256)


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
    pid_s = tl.program_id(2)  # context split (always 0 without SPLIT)
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
    l_s = tl.load(pl_ptr + offs_s * rows + row, mask=smask, other=0.0)
    acc = tl.load(pacc_ptr + (offs_s[:, None] * rows + row) * HEAD_D + offs_d[None, :], mask=smask[:, None], other=0.0)
    m_max = tl.max(m, axis=0)
    w = tl.exp2(m - tl.where(m_max == float("-inf"), 0.0, m_max))  # splits that saw nothing weigh 0
    den = tl.sum(w * l_s, axis=0)
    o = tl.sum(w[:, None] * acc, axis=0) / tl.where(den == 0.0, 1.0, den)
    bh = row // M
    i = row % M
    tl.store(o_ptr + (bh // H) * sob + (bh % H) * soh + i * som + offs_d, o.to(o_ptr.dtype.element_ty))


def check_qkv(op, q, pairs):
    """Shapes, dtypes, strides of q and each (name, k, v); returns the GQA group size."""
    if q.dim() != 4:
        raise ValueError(f"{op}: q must be [B, H, L, D], got {tuple(q.shape)}")
    bsz, heads, _, dim = q.shape
    if dim not in HEAD_DIMS:
        raise ValueError(f"{op}: head_dim {dim} not supported (one of {HEAD_DIMS})")
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


def int_lens(op, name, t, bsz, device):
    """A per-request length/offset tensor [B] as contiguous int32 on `device` (None stays None)."""
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


def launch(q, k1, v1, k2, v2, len1, len2, qstart, scale, causal, group, block_m, block_n, num_splits=None):
    """Run the forward over segment 1 (k1/v1, rows < len1[b]; causal from qstart) and,
    when k2 is given, segment 2 (k2/v2, rows < len2[b]). Inputs are already checked."""
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
    # sm_90 cubins (cuobjdump): D=128 with 4 warps spills in the split variant (255 regs) and
    # in 64-row blocks; 8 warps keeps them at ~217/~190 registers with no spills.
    num_warps = 8 if dim >= 128 and (splits > 1 or block_m >= 64) else 4
    _attn_fwd_kernel[grid](
        q, k1, v1, k2_, v2_, o, len1, len2 if has2 else dummy, qstart if causal else dummy, pacc, pm, pl,
        q.stride(0), q.stride(1), q.stride(2), k1.stride(0), k1.stride(1), k1.stride(2),
        v1.stride(0), v1.stride(1), v1.stride(2), k2_.stride(0), k2_.stride(1), k2_.stride(2),
        v2_.stride(0), v2_.stride(1), v2_.stride(2), o.stride(0), o.stride(1), o.stride(2),
        heads, group, M, float(scale) * LOG2E, splits,
        CAUSAL=causal, HAS_SEG2=has2, SPLIT=splits > 1, HEAD_D=dim, BLOCK_M=block_m, BLOCK_N=block_n,
        DOT_F32=dot_f32, PRECISION="ieee",
        num_warps=num_warps, num_stages=3 if dim <= 128 else 2,
    )
    if splits > 1:
        _attn_combine_kernel[(bsz * heads * M,)](
            pacc, pm, pl, o, o.stride(0), o.stride(1), o.stride(2), heads, M, splits,
            HEAD_D=dim, BLOCK_S=triton.next_power_of_2(splits), num_warps=4,
        )
    return o



def sdpa_masked(q, k, v, mask, scale):
    """The references' core: float32 SDPA (GQA via enable_gqa) with a bool mask [B, 1, M, N]; rows that see no key -> 0."""
    dtype = q.dtype
    q, k, v = q.float(), k.float(), v.float()
    gqa = dict(enable_gqa=True) if q.shape[1] != k.shape[1] else {}
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, **gqa)
    return torch.where(mask.any(-1, keepdim=True), out, 0.0).to(dtype)
