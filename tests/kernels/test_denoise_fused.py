"""The denoiser's fused path (confidence + commit kernels, as on CUDA) commits what the torch path does.

Runs the Triton kernels under TRITON_INTERPRET=1 on the CPU (tests/conftest.py sets it when
there is no GPU)."""

import pytest
import torch

from dllm_engine.denoise import SpecialIds, denoise_pass

SPECIAL = SpecialIds(mask=1, end=(0, 2), banned=(1, 3))


def _case(seed: int, b: int = 3, length: int = 6, vocab: int = 37, device: str = "cpu"):
    return tuple(t.to(device) for t in _cpu_case(seed, b, length, vocab))


def _cpu_case(seed: int, b: int, length: int, vocab: int):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, length, vocab, generator=g) * 3
    canvas = torch.randint(4, vocab, (b, length), generator=g)
    canvas[torch.rand(b, length, generator=g) < 0.6] = SPECIAL.mask
    canvas[:, 0] = SPECIAL.mask
    valid = torch.arange(length)[None] < torch.randint(2, length + 1, (b,), generator=g)[:, None]
    logits[1, 0, 0] = 9.0  # a confident end at slot 0
    return logits, canvas, valid


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kinds", [["max_prob"] * 3, ["margin", "neg_entropy", "max_prob"]])
@pytest.mark.parametrize("threshold", [0.3, 1.0])
def test_fused_denoise_matches_the_torch_path(device, seed, kinds, threshold):
    logits, canvas, valid = _case(seed, device=device)
    args = dict(threshold=torch.full((3,), threshold, device=device), temperature=[0.0] * 3, top_p=[1.0] * 3,
                confidence_kind=kinds, generators=[None] * 3, with_token_prob=False)
    ref = denoise_pass(logits.clone(), canvas, valid, SPECIAL, force="torch", **args)
    got = denoise_pass(logits.clone(), canvas, valid, SPECIAL, force="triton", **args)
    masked = (canvas == SPECIAL.mask) & valid
    assert torch.equal(got.commit, ref.commit), (got.commit, ref.commit)
    assert torch.equal(got.tokens[masked], ref.tokens[masked])
    assert torch.allclose(got.confidence[masked], ref.confidence[masked], atol=1e-5)
    if threshold >= 1.0:
        assert (got.commit.sum(-1) == masked.any(-1).long()).all()  # one per pass


def test_fused_path_runs_the_kernels(device, monkeypatch):
    from dllm_kernels import dispatch

    calls = []
    for name in ("confidence_stats", "commit_mask"):
        real = getattr(dispatch, name)
        monkeypatch.setattr(dispatch, name, lambda *a, _real=real, _name=name, **k: calls.append((_name, k)) or _real(*a, **k))
    logits, canvas, valid = _case(0, device=device)
    denoise_pass(logits, canvas, valid, SPECIAL, threshold=torch.full((3,), 0.5, device=device), temperature=[0.0] * 3,
                 top_p=[1.0] * 3, confidence_kind=["max_prob"] * 3, generators=[None] * 3, force="triton")
    assert [c[0] for c in calls] == ["confidence_stats", "commit_mask"]
    assert all(c[1].get("force") == "triton" for c in calls)
