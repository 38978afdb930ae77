"""Flat memory (issue 16, defect 8): a bounded set of query and key lengths reaches the CPU's
bf16 attention.

torch's CPU flash attention keeps a brgemm kernel per block shape in an unbounded per-thread
cache (attention_buckets.py), so what must hold is a shape property, checked directly: every
key length, and every query length (times the query group when GQA heads are folded), that
reaches `F.scaled_dot_product_attention` in bf16 on the CPU is a bucket. The padded attention
must be the same attention.
"""

from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from dllm_engine import ops
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import Hole, InfillRequest, ScoreRequest
from dllm_engine.row_buckets import EXACT_ROWS, bucket_rows


def _reference(q, k, v, mask):
    """fp32 attention with k/v heads repeated for GQA: the plain definition."""
    g = q.shape[1] // k.shape[1]
    k, v = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.float()
    return F.scaled_dot_product_attention(q.float(), k, v, attn_mask=mask)


def _masks(b, s, t):
    keys = torch.rand(b, 1, 1, t) > 0.3
    keys[..., 0] = True  # every query may attend to something
    full = torch.ones(s, t, dtype=torch.bool).tril(t - s)[None, None].expand(b, 1, s, t).clone()  # causal tail
    return {"none": None, "keys": keys, "full": full,
            "additive": ops.additive_mask(full, torch.bfloat16)}


@pytest.mark.parametrize("heads", [(4, 4), (4, 2)])
@pytest.mark.parametrize("kind", ["none", "keys", "full", "additive"])
def test_padded_attention_is_the_same_attention(heads, kind):
    h, hkv = heads
    b, s, t, d = 2, 21, 45, 16  # 21 queries -> 24, 45 keys -> 48: both padded
    assert bucket_rows(s) != s and bucket_rows(t) != t
    torch.manual_seed(0)
    q, k, v = torch.randn(b, h, s, d), torch.randn(b, hkv, t, d), torch.randn(b, hkv, t, d)
    mask = _masks(b, s, t)[kind]
    out = ops.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask)
    assert out.shape == (b, h, s, d) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), _reference(q, k, v, mask), rtol=2e-2, atol=2e-2)
    # fp32 passes through untouched: the same call as before
    fp32_mask = mask.float() if mask is not None and mask.dtype != torch.bool else mask
    torch.testing.assert_close(ops.attention(q, k, v, fp32_mask), _reference(q, k, v, fp32_mask))


@pytest.mark.parametrize("room", [64, 45])
def test_keys_in_a_buffer_are_padded_with_its_own_rows(room):
    """A decoding pass's keys sit in front of a preallocated buffer (runner._stack_contexts):
    the padded keys are the buffer's next rows, a view, with the same result as padding a
    copy; whatever finite values those rows hold (an earlier pass's) get zero weight. A
    buffer without room for the bucket pads a copy, as before."""
    from dllm_engine.attention_buckets import pad_attention

    b, h, hkv, s, t, d = 1, 4, 2, 3, 45, 16  # 45 keys -> 48
    torch.manual_seed(1)
    q = torch.randn(b, h, s, d).bfloat16()
    k_buf, v_buf = torch.randn(b, hkv, room, d).bfloat16(), torch.randn(b, hkv, room, d).bfloat16()
    mask = _masks(b, s, t)["keys"]
    out = ops.attention(q, k_buf, v_buf, mask, keys=t)
    alone = ops.attention(q, k_buf[:, :, :t].clone(), v_buf[:, :, :t].clone(), mask)
    assert torch.equal(out, alone)
    _, k, v, padded = pad_attention(q, k_buf, v_buf, mask, keys=t)
    assert k.shape[-2] == v.shape[-2] == padded.shape[-1] == bucket_rows(t)
    assert (k.data_ptr() == k_buf.data_ptr()) == (room >= bucket_rows(t))  # a view when it fits
    # fp32 (no buckets) reads only the keys
    torch.testing.assert_close(ops.attention(q.float(), k_buf.float(), v_buf.float(), mask, keys=t),
                               _reference(q.float(), k_buf[:, :, :t].float(), v_buf[:, :, :t].float(), mask))


@pytest.fixture
def attention_lengths(monkeypatch):
    """(query length, key length, query group) of every CPU bf16 SDPA call while the test runs."""
    seen: Counter = Counter()
    real = F.scaled_dot_product_attention

    def recording(q, k, v, *args, **kwargs):
        if q.device.type == "cpu" and q.dtype == torch.bfloat16:
            seen[(q.shape[-2], k.shape[-2])] += 1
        return real(q, k, v, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    return seen


def test_engine_sends_only_bucket_lengths_to_a_bf16_attention(attention_lengths):
    """Twelve contexts of twelve lengths (fresh encodes, cached tails, batches of 1-3
    canvases) and a scoring pass: before the fix every length was new brgemm kernels kept
    for good by the thread that ran them."""
    engine = Engine(EngineConfig(dtype="bfloat16", threads=1, heal=False))  # the small model
    try:
        cfg = engine.loaded.config
        group = cfg.num_heads // cfg.num_kv_heads
        for i in range(12):
            prefix = "def f(x):\n" + "    x = x + 1\n" * (i % 6 + 1) + "    y = " + "a" * (3 * i)
            holes = [Hole(prefix=prefix + "b" * j, suffix="\n    return y\n", max_tokens=6) for j in range(i % 3 + 1)]
            engine.infill(InfillRequest(holes=holes))
        engine.score(ScoreRequest(prefix="def g(a, b):\n    return ", span="a + b * 3 - 7", suffix="\n"))
    finally:
        engine.shutdown()
    assert attention_lengths, "no bf16 attention ran: the test no longer covers the engine's attention"
    keys = sorted({t for _, t in attention_lengths})
    assert max(keys) > 2 * EXACT_ROWS  # context encodes went through
    assert [t for t in keys if bucket_rows(t) != t] == []

    def is_bucket(n: int) -> bool:
        return bucket_rows(n) == n

    odd_queries = [s for s, _ in attention_lengths if not (is_bucket(s) or s % group == 0 and is_bucket(s // group))]
    assert odd_queries == []


@pytest.mark.parametrize("heads", [(4, 4), (4, 2)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_plain_causal_is_the_masked_causal_attention(heads, dtype):
    """ops.CAUSAL (a context encoded from its first token) runs SDPA's is_causal: the same
    attention as the explicit causal mask, padded rows included (21 queries -> 24 in bf16)."""
    h, hkv = heads
    b, s, d = 2, 21, 16
    torch.manual_seed(1)
    q, k, v = torch.randn(b, h, s, d), torch.randn(b, hkv, s, d), torch.randn(b, hkv, s, d)
    causal = torch.ones(s, s, dtype=torch.bool).tril()[None, None]
    out = ops.attention(q.to(dtype), k.to(dtype), v.to(dtype), ops.CAUSAL)
    assert out.shape == (b, h, s, d) and out.dtype == dtype
    masked = ops.attention(q.to(dtype), k.to(dtype), v.to(dtype), causal)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.float(), _reference(q, k, v, causal), rtol=tol, atol=tol)
    torch.testing.assert_close(out.float(), masked.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("kind", ["full", "additive"])
def test_a_mask_per_row_folds_the_query_groups_without_changing_a_bit(dtype, kind):
    """A decoding pass's rows each have their own mask (the held-out token and its drafts,
    causal among themselves): ops folds each KV head's query group into the query axis with
    the mask repeated per head, and must give exactly what SDPA's enable_gqa gives."""
    b, h, hkv, s, t, d = 2, 6, 2, 4, 48, 16  # bucket lengths: no padding, only the fold
    torch.manual_seed(2)
    q, k, v = torch.randn(b, h, s, d).to(dtype), torch.randn(b, hkv, t, d).to(dtype), torch.randn(b, hkv, t, d).to(dtype)
    mask = _masks(b, s, t)[kind]
    mask = mask if mask.dtype == torch.bool else mask.to(dtype)
    out = ops.attention(q, k, v, mask)
    assert torch.equal(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True))
    # the rows differ: a mask applied to the wrong row would not pass the line above
    assert not torch.equal(mask[:, :, 0], mask[:, :, -1])


def test_layers_of_one_forward_share_what_a_mask_derives(monkeypatch):
    """ops.masks_shared_by_layers (every layer of a forward passes the same mask): the mask's
    bucket padding and its rows repeated per query head are made once for all the layers,
    bit for bit the attention each layer would get alone; a different mask object, or the
    same one after the forward, is never served from it."""
    from dllm_engine import attention_buckets

    made = Counter()
    real_bucket = attention_buckets.bucket_mask

    def counting(*args):
        made["bucket"] += 1
        return real_bucket(*args)

    monkeypatch.setattr(ops, "bucket_mask", counting)
    b, h, hkv, s, t, d = 1, 6, 2, 5, 45, 16  # 5 rows, a mask per row (a decoding pass), 45 keys -> 48
    torch.manual_seed(0)
    layers = [(torch.randn(b, h, s, d).bfloat16(), torch.randn(b, hkv, t, d).bfloat16(),
               torch.randn(b, hkv, t, d).bfloat16()) for _ in range(4)]
    mask = ops.additive_mask(_masks(b, s, t)["full"], torch.bfloat16)
    alone = [ops.attention(q, k, v, mask) for q, k, v in layers]
    assert made["bucket"] == 4
    made.clear()
    with ops.masks_shared_by_layers():
        shared = [ops.attention(q, k, v, mask) for q, k, v in layers]
        other = ops.additive_mask(_masks(b, s, t)["full"].flip(-1), torch.bfloat16)  # another mask
        q, k, v = layers[0]
        assert torch.equal(ops.attention(q, k, v, other), ops.attention(q, k, v, other.clone()))
    assert made["bucket"] == 3  # the first mask once, then `other` and its clone each once
    for a, c in zip(alone, shared):
        assert torch.equal(a, c)
    # outside the forward nothing is kept: the mask edited in place gives its new attention
    mask.fill_(0.0)
    q, k, v = layers[0]
    assert not torch.equal(ops.attention(q, k, v, mask), alone[0])


def test_a_forward_is_the_same_with_its_layers_sharing_masks(monkeypatch):
    """The default-shaped model's bf16 decoding pass over a cached context, the masks shared
    by its layers or made in each: the same logits bit for bit (rope's sign and the mask's
    padding and head-group repeat made once a forward)."""
    import contextlib

    from dllm_engine.layout import causal_mask
    from dllm_engine.model import DiffusionTransformer
    from dllm_engine.model_config import ModelConfig

    cfg = ModelConfig(vocab_size=300, hidden_size=96, num_layers=3, num_heads=6, num_kv_heads=2,
                      intermediate_size=160, head_dim=16, mask_token_id=1, pad_token_id=0, eos_token_id=2)
    torch.manual_seed(0)
    model = DiffusionTransformer(cfg).bfloat16().eval()
    model.fuse_projections()
    ctx, rows = 45, 5  # a 45-token context, then 5 rows (the held-out token and 4 drafts)
    ids = torch.randint(0, 300, (1, ctx + rows))
    with torch.inference_mode():
        _, kv = model(ids[:, :ctx], torch.arange(ctx)[None], mask=causal_mask(0, ctx, "cpu"), return_kv=True)

        def step():
            past = []
            for k, v in kv:
                k_buf, v_buf = torch.zeros(1, 2, 64, 16, dtype=k.dtype), torch.zeros(1, 2, 64, 16, dtype=v.dtype)
                k_buf[:, :, :ctx], v_buf[:, :, :ctx] = k, v
                past.append((k_buf, v_buf, ctx))
            return model(ids[:, ctx:], torch.arange(ctx, ctx + rows)[None], mask=causal_mask(ctx, rows, "cpu"),
                         past=past)[0]

        shared = step()
        monkeypatch.setattr(ops, "masks_shared_by_layers", contextlib.nullcontext)
        alone = step()
    assert torch.equal(shared, alone)
