"""few_query_attention.py: a decoding pass's few query rows over a long context, the same
attention as torch's SDPA (float32 reference), grouped-query heads and masks included."""

import pytest
import torch
import torch.nn.functional as F

from dllm_engine import few_query_attention as few
from dllm_engine import ops


def reference(q, k, v, mask):
    g = q.shape[1] // k.shape[1]
    k, v = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    m = None if mask is None else (mask if mask.dtype == torch.bool else mask.float())
    return F.scaled_dot_product_attention(q.float(), k, v, attn_mask=m)


@pytest.mark.parametrize("rows,keys,shared", [(1, 1024, True), (4, 1100, False), (8, 2048, False)])
@pytest.mark.parametrize("kind", ["additive", "bool", "none"])
def test_the_same_attention_as_sdpa(rows, keys, shared, kind):
    torch.manual_seed(rows + keys)
    q = torch.randn(2, 9, rows, 64, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 3, keys, 64, dtype=torch.bfloat16) for _ in range(2))
    allowed = torch.ones(2, 1, 1 if shared else rows, keys, dtype=torch.bool)
    allowed[0, ..., -37:] = False  # padded keys of the first batch row
    if not shared:
        allowed[..., :, keys - rows:] = torch.ones(rows, rows, dtype=torch.bool).tril()  # causal draft rows
    mask = {"bool": allowed, "additive": ops.additive_mask(allowed, torch.bfloat16), "none": None}[kind]
    assert few.applies(q, k)
    got = few.few_query_attention(q, k, v, mask)
    assert got.dtype == torch.bfloat16 and got.shape == q.shape
    assert torch.allclose(got.float(), reference(q, k, v, mask), atol=2e-2, rtol=0)


def test_only_where_it_is_the_faster_path():
    q = torch.zeros(1, 9, 4, 64, dtype=torch.bfloat16)
    long, short = torch.zeros(1, 3, few.LONG_KEYS, 64, dtype=torch.bfloat16), torch.zeros(1, 3, 256, 64, dtype=torch.bfloat16)
    assert few.applies(q, long) and not few.applies(q, short)
    assert not few.applies(q.float(), long.float())  # fp32 stays on SDPA
    assert not few.applies(torch.zeros(1, 9, 64, 64, dtype=torch.bfloat16), long)  # many rows: a context encode


def test_ops_attention_takes_it_with_padded_keys_from_a_buffer():
    """Through ops.attention: a preallocated key buffer (keys=), rows padded to buckets."""
    torch.manual_seed(0)
    keys = 1500
    q = torch.randn(1, 9, 3, 64, dtype=torch.bfloat16)
    k_buf, v_buf = (torch.cat((torch.randn(1, 3, keys, 64), torch.zeros(1, 3, 600, 64)), 2).to(torch.bfloat16)
                    for _ in range(2))
    allowed = torch.ones(1, 1, 3, keys, dtype=torch.bool)
    allowed[..., keys - 3:] = torch.ones(3, 3, dtype=torch.bool).tril()
    got = ops.attention(q, k_buf, v_buf, ops.additive_mask(allowed, torch.bfloat16), keys=keys)
    want = reference(q, k_buf[:, :, :keys], v_buf[:, :, :keys], allowed)
    assert torch.allclose(got.float(), want, atol=2e-2, rtol=0)
