import pytest
import torch

from dllm_kernels.kv_append import kv_append_reference, kv_append_triton


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "bsz,kv_heads,T,S,dim,start,new_lens",
    [
        (1, 1, 5, 5, 32, [0], None),  # fill an empty cache
        (3, 4, 40, 7, 64, [0, 33, 10], [7, 7, 2]),  # per-request offsets and counts
        (2, 2, 10, 4, 128, [8, 9], None),  # rows past T are dropped
    ],
)
def test_kv_append_matches_reference(device, dtype, bsz, kv_heads, T, S, dim, start, new_lens):
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    kc = torch.randn(bsz, kv_heads, T, dim, device=device).to(dt)
    vc = torch.randn_like(kc)
    kn = torch.randn(bsz, kv_heads, S, dim, device=device).to(dt)
    vn = torch.randn_like(kn)
    st = torch.tensor(start, device=device)
    nl = torch.tensor(new_lens, device=device) if new_lens is not None else None
    want_k, want_v = kv_append_reference(kc.clone(), vc.clone(), kn, vn, st, nl)
    got_k, got_v = kc.clone(), vc.clone()
    kv_append_triton(got_k, got_v, kn, vn, st, nl)
    for name, got, want in (("k", got_k, want_k), ("v", got_v, want_v)):
        if not torch.equal(got, want):
            where = (got != want).any(-1).nonzero()[:3].tolist()
            raise AssertionError(f"{name} cache differs at [b, h, t] {where}")
    assert torch.equal(want_k[0, :, start[0]], kn[0, :, 0])


def test_kv_append_strided_new_rows(device):
    kc = torch.zeros(1, 2, 8, 32, device=device)
    vc = torch.zeros_like(kc)
    kn = torch.randn(1, 3, 2, 32, device=device).transpose(1, 2)  # [B, H_kv, S, D] view of [B, S, H, D]
    kv_append_triton(kc, vc, kn, kn, torch.tensor([4], device=device))
    assert torch.equal(kc[:, :, 4:7], kn) and kc[:, :, :4].abs().sum() == 0


def test_kv_append_rejects_bad_input(device):
    kc = torch.zeros(1, 2, 8, 32, device=device)
    with pytest.raises(ValueError, match="do not fit"):
        kv_append_triton(kc, kc.clone(), torch.zeros(1, 3, 1, 32, device=device), torch.zeros(1, 3, 1, 32, device=device), torch.tensor([0]))
