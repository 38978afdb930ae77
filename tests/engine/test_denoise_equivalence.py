"""The masked-slots-only denoiser commits exactly what the plain full-vocabulary one does."""

import pytest
import torch

from dllm_engine.denoise import SpecialIds, denoise_pass

from denoise_reference import reference_denoise_pass

SPECIAL = SpecialIds(mask=1, end=(0, 2), banned=(1, 3))


def _case(seed: int, b: int = 4, length: int = 7, vocab: int = 40):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, length, vocab, generator=g) * 3
    canvas = torch.randint(4, vocab, (b, length), generator=g)
    canvas[torch.rand(b, length, generator=g) < 0.6] = SPECIAL.mask
    canvas[0, 0] = SPECIAL.mask  # slot 0 masked: the confident-end rule applies
    canvas[1, :2] = torch.tensor([7, SPECIAL.mask])  # an end may follow the committed slot 0
    lengths = torch.randint(2, length + 1, (b,), generator=g)
    valid = torch.arange(length)[None] < lengths[:, None]
    logits[2, 0, 0] = 9.0  # a confident end at slot 0 (p ~0.99: clear of the threshold-1 edge)
    return logits, canvas, valid


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kinds", [["max_prob"] * 4, ["margin", "neg_entropy", "max_prob", "margin"]])
@pytest.mark.parametrize("threshold", [0.3, 0.9, 1.0])
def test_greedy_matches_the_reference(seed, kinds, threshold):
    logits, canvas, valid = _case(seed)
    args = dict(threshold=torch.full((4,), threshold), temperature=[0.0] * 4, top_p=[1.0] * 4,
                confidence_kind=kinds, generators=[None] * 4)
    ref = reference_denoise_pass(logits.clone(), canvas, valid, SPECIAL, **args)
    got = denoise_pass(logits.clone(), canvas, valid, SPECIAL, **args)
    masked = (canvas == SPECIAL.mask) & valid
    assert torch.equal(got.commit, ref.commit)
    assert torch.equal(got.tokens[masked], ref.tokens[masked])
    assert torch.allclose(got.confidence[masked], ref.confidence[masked], atol=1e-5)
    assert torch.allclose(got.token_prob, ref.token_prob, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_sampling_matches_the_reference_with_the_same_generators(seed):
    logits, canvas, valid = _case(seed)

    def run(fn):
        gens = [torch.Generator().manual_seed(100 + i) for i in range(4)]
        return fn(logits.clone(), canvas, valid, SPECIAL, threshold=torch.full((4,), 0.5),
                  temperature=[0.7, 0.0, 1.2, 0.7], top_p=[0.9, 1.0, 1.0, 0.5],
                  confidence_kind=["max_prob"] * 4, generators=gens)

    ref, got = run(reference_denoise_pass), run(denoise_pass)
    masked = (canvas == SPECIAL.mask) & valid
    assert torch.equal(got.tokens[masked], ref.tokens[masked]) and torch.equal(got.commit, ref.commit)


def test_only_masked_rows_are_read():
    """The engine computes logits for masked slots only; garbage elsewhere changes nothing."""
    logits, canvas, valid = _case(7)
    masked = (canvas == SPECIAL.mask) & valid
    noisy = logits.clone()
    noisy[~masked] = float("nan")
    args = dict(threshold=torch.full((4,), 0.5), temperature=[0.0] * 4, top_p=[1.0] * 4,
                confidence_kind=["max_prob"] * 4, generators=[None] * 4, with_token_prob=False)
    a, b = denoise_pass(logits, canvas, valid, SPECIAL, **args), denoise_pass(noisy, canvas, valid, SPECIAL, **args)
    assert torch.equal(a.commit, b.commit) and torch.equal(a.tokens[masked], b.tokens[masked])
