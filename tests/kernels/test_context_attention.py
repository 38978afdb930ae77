import pytest
import torch

from dllm_kernels import dispatch
from dllm_kernels.context_attention import context_attention_reference, context_attention_triton


# (B, H, H_kv, S, T, q_start, kv_lens, D): the new tokens of each request sit at
# q_start[b] .. in a cache filled up to kv_lens[b]; padded query rows included.
PREFILL_CASES = [
    (1, 4, 4, 5, 5, [0], [5], 32),
    (3, 4, 1, 7, 40, [33, 0, 10], [40, 7, 17], 64),
    (2, 7, 1, 33, 130, [97, 0], [130, 33], 128),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("B,H,Hkv,S,T,q_start,kv_lens,D", PREFILL_CASES)
def test_context_attention_is_causal_and_matches_sdpa(device, assert_close, tolerance, dtype, B, H, Hkv, S, T, q_start, kv_lens, D):
    torch.manual_seed(2)
    atol, rtol = tolerance(dtype)
    dt = getattr(torch, dtype)
    q = torch.randn(B, H, S, D, device=device).to(dt)
    k = torch.randn(B, Hkv, T, D, device=device).to(dt)
    v = torch.randn(B, Hkv, T, D, device=device).to(dt)
    qs, kl = torch.tensor(q_start, device=device), torch.tensor(kv_lens, device=device)
    got = context_attention_triton(q, k, v, qs, kl, D**-0.5, block_m=16, block_n=16)
    want = context_attention_reference(q, k, v, qs, kl, D**-0.5)
    assert_close(got, want, atol * 5, rtol * 5, f"prefill {dtype} B{B} H{H}/{Hkv} S{S} T{T} D{D}")


def test_prefill_of_whole_sequence_equals_plain_causal_sdpa(device, assert_close):
    torch.manual_seed(3)
    q = torch.randn(1, 4, 19, 64, device=device)
    k = torch.randn(1, 4, 19, 64, device=device)
    v = torch.randn(1, 4, 19, 64, device=device)
    zero, n = torch.tensor([0], device=device), torch.tensor([19], device=device)
    got = context_attention_triton(q, k, v, zero, n, 0.125)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.125)
    assert_close(got, want, 1e-4, 1e-4, "causal prefill")


def test_prefill_dispatch_and_bad_input(device, assert_close):
    q = torch.randn(1, 4, 6, 32, device=device)
    k = torch.randn(1, 2, 6, 32, device=device)
    qs, kl = torch.tensor([0], device=device), torch.tensor([6], device=device)
    a = dispatch.context_attention(q, k, k, qs, kl, 0.2, force="triton")
    assert_close(a, dispatch.context_attention(q, k, k, qs, kl, 0.2, force="torch"), 1e-4, 1e-4, "dispatch")
    with pytest.raises(ValueError, match="q_start"):
        context_attention_triton(q, k, k, torch.tensor([0, 0], device=device), kl, 0.2)
