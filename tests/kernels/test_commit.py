import pytest
import torch

from dllm_kernels import dispatch
from dllm_kernels.commit import commit_mask_reference, commit_mask_triton


def _check(masked, conf, threshold):
    got = commit_mask_triton(masked, conf, threshold)
    want = commit_mask_reference(masked, conf, threshold)
    assert got.dtype == torch.bool and got.shape == masked.shape
    if not torch.equal(got.cpu(), want.cpu()):
        rows = (got != want).any(-1).nonzero()[:, 0].tolist()
        raise AssertionError(f"rows {rows} differ: got {got[rows].int().tolist()}, want {want[rows].int().tolist()}")
    return got


@pytest.mark.parametrize("rows,length", [(1, 1), (3, 7), (5, 33), (2, 130)])
@pytest.mark.parametrize("threshold", [0.0, 0.6, 1.5, "per_row"])
def test_commit_matches_reference(device, rows, length, threshold):
    torch.manual_seed(rows * 1000 + length)
    masked = torch.rand(rows, length, device=device) < 0.6
    masked[0] = False  # nothing left to commit in row 0
    conf = torch.rand(rows, length, device=device)
    if threshold == "per_row":
        threshold = torch.linspace(0.2, 1.2, rows, device=device)
    _check(masked, conf, threshold)


def test_commit_rule_semantics(device):
    masked = torch.tensor([[True, True, False, True], [False] * 4, [True] * 4], device=device)
    conf = torch.tensor([[0.3, 0.95, 0.99, 0.91], [0.9] * 4, [0.5, 0.7, 0.7, 0.1]], device=device)
    got = _check(masked, conf, 0.9)
    assert got.tolist() == [
        [False, True, False, True],  # above threshold and masked; slot 2 is not masked
        [False] * 4,  # nothing masked, nothing forced
        [False, True, False, False],  # none clears: the best masked slot, first on ties
    ]


def test_commit_is_dispatched_without_host_sync_on_cpu(device):
    masked = torch.ones(2, 5, dtype=torch.bool, device=device)
    conf = torch.rand(2, 5, device=device)
    assert dispatch.commit_mask(masked, conf, 2.0).sum(-1).tolist() == [1, 1]


def test_commit_rejects_bad_input(device):
    with pytest.raises(ValueError, match="bool"):
        commit_mask_triton(torch.ones(2, 3, device=device), torch.rand(2, 3, device=device), 0.5)
    with pytest.raises(ValueError, match="thresholds"):
        commit_mask_triton(torch.ones(2, 3, dtype=torch.bool, device=device), torch.rand(2, 3, device=device), torch.ones(3))
