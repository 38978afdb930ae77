import math

import pytest
import torch

from dllm_kernels.confidence import confidence_stats_reference, confidence_stats_triton


def _check(got, want, assert_close, atol=2e-5):
    assert got.token.dtype == torch.int64
    assert torch.equal(got.token.cpu(), want.token.cpu()), f"tokens {got.token.tolist()} != {want.token.tolist()}"
    assert_close(got.prob, want.prob, atol, 1e-4, "prob")
    assert_close(got.margin, want.margin, atol, 1e-4, "margin")
    assert_close(got.entropy, want.entropy, atol * 5, 1e-4, "entropy")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rows,vocab,block_v", [(1, 1, None), (7, 2, None), (7, 5, None), (3, 1000, 128), (2, 4099, 1024)])
def test_confidence_matches_reference(device, assert_close, dtype, rows, vocab, block_v):
    torch.manual_seed(0)
    logits = (torch.randn(rows, vocab, device=device) * 4).to(getattr(torch, dtype))
    for temperature in (1.0, 0.7):
        _check(confidence_stats_triton(logits, temperature, block_v), confidence_stats_reference(logits, temperature), assert_close)


def test_per_row_temperature_and_greedy(device, assert_close):
    torch.manual_seed(1)
    logits = torch.randn(4, 300, device=device) * 3
    temps = torch.tensor([0.0, 0.5, 1.0, 2.0], device=device)  # 0 = greedy: stats at temperature 1
    got = confidence_stats_triton(logits, temps, block_v=64)
    _check(got, confidence_stats_reference(logits, temps), assert_close)
    at_one = confidence_stats_reference(logits[:1], 1.0)
    assert_close(got.prob[:1], at_one.prob, 1e-6, 1e-5, "greedy row uses temperature 1")


def test_ties_banned_tokens_and_closed_forms(device, assert_close):
    v = 300
    logits = torch.zeros(4, v, device=device)
    logits[0, 10] = logits[0, 250] = 5.0  # tie across chunks: first index, margin 0
    logits[1, :] = float("-inf")
    logits[1, 200] = 2.0
    logits[1, 7] = 1.0  # two live tokens among banned ones
    # row 2: uniform, entropy log V; row 3: one-hot-ish
    logits[3, 123] = 50.0
    got = confidence_stats_triton(logits, 1.0, block_v=64)
    _check(got, confidence_stats_reference(logits, 1.0), assert_close)
    assert got.token.tolist()[:2] == [10, 200]
    assert got.margin[0].item() == pytest.approx(0.0, abs=1e-7)
    p = 1 / (1 + math.exp(-1.0))
    assert got.prob[1].item() == pytest.approx(p, rel=1e-5)
    assert got.entropy[1].item() == pytest.approx(-(p * math.log(p) + (1 - p) * math.log(1 - p)), rel=1e-5)
    assert got.entropy[2].item() == pytest.approx(math.log(v), rel=1e-5)
    assert got.prob[3].item() == pytest.approx(1.0, abs=1e-6)


def test_confidence_rejects_bad_input(device):
    with pytest.raises(ValueError, match="logits"):
        confidence_stats_triton(torch.randn(2, 3, 4, device=device))
    with pytest.raises(ValueError, match="temperatures"):
        confidence_stats_triton(torch.randn(2, 4, device=device), torch.ones(3, device=device))
