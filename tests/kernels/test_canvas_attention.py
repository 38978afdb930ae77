import pytest
import torch

from dllm_kernels import dispatch
from dllm_kernels.canvas_attention import canvas_attention_reference, canvas_attention_triton

# (B, H, H_kv, L, T, context_lens, D): odd canvas lengths, empty/short/long contexts,
# GQA ratios 1, 4 and 7, head dims 32, 64 and 128, per-request context lengths.
CANVAS_CASES = [
    (1, 4, 4, 1, 0, [0], 32),
    (3, 4, 1, 7, 5, [5, 0, 3], 64),
    (2, 7, 1, 33, 130, [130, 17], 128),
    (3, 8, 2, 7, 130, [1, 130, 64], 32),
]


def _canvas_inputs(device, dtype, B, H, Hkv, L, T, D):
    q = torch.randn(B, H, L, D, device=device).to(dtype)
    kc = torch.randn(B, Hkv, T, D, device=device).to(dtype)
    vc = torch.randn(B, Hkv, T, D, device=device).to(dtype)
    kn = torch.randn(B, Hkv, L, D, device=device).to(dtype)
    vn = torch.randn(B, Hkv, L, D, device=device).to(dtype)
    return q, kc, vc, kn, vn


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("B,H,Hkv,L,T,ctx,D", CANVAS_CASES)
@pytest.mark.parametrize("block_n,num_splits", [(None, None), (16, 1), (16, 3)])
def test_canvas_attention_matches_sdpa(device, assert_close, tolerance, dtype, B, H, Hkv, L, T, ctx, D, block_n, num_splits):
    torch.manual_seed(0)
    atol, rtol = tolerance(dtype)
    q, kc, vc, kn, vn = _canvas_inputs(device, getattr(torch, dtype), B, H, Hkv, L, T, D)
    lens = torch.tensor(ctx, device=device)
    got = canvas_attention_triton(q, kc, vc, lens, kn, vn, D**-0.5, block_n=block_n, num_splits=num_splits)
    want = canvas_attention_reference(q, kc, vc, lens, kn, vn, D**-0.5)
    assert got.shape == q.shape and got.dtype == q.dtype
    assert_close(got, want, atol * 5, rtol * 5, f"canvas attention {dtype} B{B} H{H}/{Hkv} L{L} T{T} D{D}")


def test_canvas_lens_hide_padding_slots_and_padding_context_is_ignored(device, assert_close):
    torch.manual_seed(1)
    q, kc, vc, kn, vn = _canvas_inputs(device, torch.float32, 2, 4, 2, 9, 20, 32)
    ctx, canvas = torch.tensor([20, 3], device=device), torch.tensor([9, 4], device=device)
    got = canvas_attention_triton(q, kc, vc, ctx, kn, vn, 0.2, canvas_lens=canvas)
    assert_close(got, canvas_attention_reference(q, kc, vc, ctx, kn, vn, 0.2, canvas), 1e-4, 1e-4, "canvas_lens")
    # garbage in the padded context rows and canvas slots of request 1 changes nothing
    kc2, vn2 = kc.clone(), vn.clone()
    kc2[1, :, 3:] = 1e4
    vn2[1, :, 4:] = -1e4
    again = canvas_attention_triton(q, kc2, vc, ctx, kn, vn2, 0.2, canvas_lens=canvas)
    assert_close(again, got, 1e-5, 1e-5, "padding must not leak")


def test_canvas_over_cache_equals_one_bidirectional_block(device, assert_close):
    """The canvas path is the prefill path's cache plus a non-causal block at its end."""
    torch.manual_seed(4)
    T, L = 12, 5
    q, kc, vc, kn, vn = _canvas_inputs(device, torch.float32, 1, 2, 2, L, T, 32)
    got = canvas_attention_triton(q, kc, vc, torch.tensor([T], device=device), kn, vn, 0.3)
    k, v = torch.cat((kc, kn), 2), torch.cat((vc, vn), 2)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3)
    assert_close(got, want, 1e-4, 1e-4, "canvas = full attention over context ++ canvas")


def test_attention_rejects_bad_input(device):
    q, kc, vc, kn, vn = _canvas_inputs(device, torch.float32, 1, 6, 4, 3, 4, 32)
    lens = torch.tensor([4], device=device)
    with pytest.raises(ValueError, match="multiple"):
        canvas_attention_triton(q, kc, vc, lens, kn, vn, 0.1)
    q, kc, vc, kn, vn = _canvas_inputs(device, torch.float32, 1, 4, 4, 3, 4, 48)
    with pytest.raises(ValueError, match="head_dim"):
        canvas_attention_triton(q, kc, vc, lens, kn, vn, 0.1)
    q, kc, vc, kn, vn = _canvas_inputs(device, torch.float32, 1, 4, 4, 3, 4, 32)
    with pytest.raises(ValueError, match="do not match"):
        canvas_attention_triton(q, kc.half(), vc.half(), lens, kn, vn, 0.1)
    with pytest.raises(ValueError, match="context_lens"):
        canvas_attention_triton(q, kc, vc, lens.float(), kn, vn, 0.1)


def test_dispatch_routes_attention(device, assert_close):
    q, kc, vc, kn, vn = _canvas_inputs(device, torch.float32, 2, 4, 2, 3, 6, 32)
    lens = torch.tensor([6, 2], device=device)
    a = dispatch.canvas_attention(q, kc, vc, lens, kn, vn, 0.2, force="triton")
    b = dispatch.canvas_attention(q, kc, vc, lens, kn, vn, 0.2, force="torch")
    assert_close(a, b, 1e-4, 1e-4, "dispatch canvas_attention")
