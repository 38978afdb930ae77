import pytest
import torch

from dllm_kernels.rope import apply_rope_reference, apply_rope_triton, rope_cos_sin


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "bsz,seq,heads,kv_heads,dim",
    [(1, 1, 4, 4, 32), (2, 7, 7, 1, 64), (3, 5, 28, 4, 128)],
)
@pytest.mark.parametrize("per_request_positions", [False, True])
def test_rope_matches_reference(device, assert_close, tolerance, dtype, bsz, seq, heads, kv_heads, dim, per_request_positions):
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    atol, rtol = tolerance(dtype)
    # q, k as a model produces them: [B, S, H, D] projections viewed as [B, H, S, D]
    q = torch.randn(bsz, seq, heads, dim, dtype=dt, device=device).transpose(1, 2)
    k = torch.randn(bsz, seq, kv_heads, dim, dtype=dt, device=device).transpose(1, 2)
    if per_request_positions:
        positions = torch.arange(seq, device=device)[None, :] + torch.randint(0, 5000, (bsz, 1), device=device)
    else:
        positions = torch.arange(seq, device=device) + 3
    cos, sin = rope_cos_sin(positions, dim, theta=1e6)
    q_ref, k_ref = q.clone(), k.clone()
    apply_rope_reference(q_ref, k_ref, cos, sin)
    q_out, k_out = apply_rope_triton(q, k, cos, sin)
    assert q_out is q and k_out is k  # rotated in place
    assert_close(q, q_ref, atol, rtol, "rope q")
    assert_close(k, k_ref, atol, rtol, "rope k")


def test_rope_accepts_hugging_face_tables(device, assert_close):
    """cos/sin [B, 1, S, D] with equal halves, as the engine's model builds them."""
    torch.manual_seed(5)
    positions = torch.tensor([[4, 5, 6], [0, 1, 2]], device=device)
    cos, sin = rope_cos_sin(positions, 64)
    hf_cos, hf_sin = (torch.cat((t, t), -1)[:, None] for t in (cos, sin))
    q, k = torch.randn(2, 4, 3, 64, device=device), torch.randn(2, 2, 3, 64, device=device)
    # the Hugging Face formula: x * cos + rotate_half(x) * sin
    q_hf, k_hf = (x * hf_cos + torch.cat((-x[..., 32:], x[..., :32]), -1) * hf_sin for x in (q, k))
    apply_rope_triton(q, k, hf_cos, hf_sin)
    assert_close(q, q_hf, 1e-5, 1e-5, "q")
    assert_close(k, k_hf, 1e-5, 1e-5, "k")


def test_rope_position_zero_is_identity_and_rotation_keeps_norm(device, assert_close):
    q = torch.randn(1, 2, 3, 32, device=device)
    k = torch.randn(1, 1, 3, 32, device=device)
    q0 = q.clone()
    cos, sin = rope_cos_sin(torch.tensor([0, 1, 2], device=device), 32)
    apply_rope_triton(q, k, cos, sin)
    assert_close(q[:, :, 0], q0[:, :, 0], 1e-6, 1e-6, "position 0")
    assert_close(q.norm(dim=-1), q0.norm(dim=-1), 1e-5, 1e-5, "norm")
    assert not torch.allclose(q[:, :, 1], q0[:, :, 1])


def test_rope_rejects_bad_input(device):
    q = torch.randn(1, 2, 3, 32, device=device)
    cos, sin = rope_cos_sin(torch.arange(4, device=device), 32)
    with pytest.raises(ValueError, match="cos/sin"):
        apply_rope_triton(q, q.clone(), cos, sin)
    with pytest.raises(ValueError, match="head_dim"):
        apply_rope_triton(torch.randn(1, 2, 3, 24, device=device), torch.randn(1, 2, 3, 24, device=device), cos, sin)
