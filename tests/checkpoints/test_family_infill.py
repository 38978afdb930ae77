"""Family infill layouts, shifted-logit alignment, approximate and exact caches."""

from __future__ import annotations

import pytest
import torch

from ckpt_reference import reference_logits
from ckpt_writers import EOS, EXTRA, FAMILY_NAMES, MASK, SPECS, write_checkpoint
from dllm_engine.checkpoint import load
from dllm_engine.families.family_runner import FamilyRunner
from dllm_engine.families.infill_layout import dreamon_edit
from dllm_engine.families.infill_run import run_infill

HOLES = [([5, 17, 33, 2, 60], [71, 8, 44]), ([40, 41], [9, 88, 1, 30, 29]), ([], [3, 4])]
BIDIRECTIONAL = [f for f in FAMILY_NAMES if SPECS[f]["tensors"].get("kind") == "llada" or f not in ("sdar", "fast_dllm_v2")]


def _canvas(width, lens, fill=MASK, pad=EOS):
    c = torch.full((len(lens), width), pad)
    for r, n in enumerate(lens):
        c[r, :n] = fill
    return c


def _expected(family, tensors, hole, canvas_row, n):
    """Independent: the unpadded sequence prefix + canvas + suffix, reference forward, shift by hand."""
    prefix, suffix = hole
    block = family in ("sdar", "fast_dllm_v2")
    seq = prefix + canvas_row[:n] + ([] if block else suffix)
    ref = reference_logits(family, tensors, SPECS[family]["config"], [seq], [[1] * len(seq)])[0]
    rows = [len(prefix) + j for j in range(n)]
    if family not in ("llada", "sdar"):  # shifted families
        rows = [max(r - 1, 0) if (r > 0 and prefix) or j > 0 else r for j, r in enumerate(rows)]
    return ref[rows]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_canvas_logits_match_independent_layout(tmp_path, family):
    tensors = write_checkpoint(tmp_path / family, family)
    runner = FamilyRunner(load(str(tmp_path / family)), refresh_every=1)
    ctxs = [runner.encode_context(p, s, 8) for p, s in HOLES]
    lens = [6, 4, 5]
    canvas = _canvas(6, lens)
    canvas[0, 1], canvas[1, 0] = 12, 13  # some committed slots
    got = runner.canvas_logits(ctxs, canvas, torch.tensor(lens)).double()
    for r, hole in enumerate(HOLES):
        want = _expected(family, tensors, hole, canvas[r].tolist(), lens[r])
        if family in ("sdar", "fast_dllm_v2"):  # only the current block's slots are live
            live = (got[r, : lens[r]].abs().sum(-1) > 0)
            assert live[0]
            assert (got[r, : lens[r]][live] - want[live]).abs().max() < 1e-4
        else:
            assert (got[r, : lens[r]] - want).abs().max() < 1e-4, family


@pytest.mark.parametrize("family", ["llada", "dream", "coda"])
def test_approximate_cache_is_exact_while_canvas_unchanged(tmp_path, family):
    write_checkpoint(tmp_path / family, family)
    loaded = load(str(tmp_path / family))
    exact, approx = FamilyRunner(loaded, refresh_every=1), FamilyRunner(loaded, refresh_every=4)
    ctx_e = [exact.encode_context(p, s, 8) for p, s in HOLES]
    ctx_a = [approx.encode_context(p, s, 8) for p, s in HOLES]
    lens = torch.tensor([6, 6, 3])
    canvas = _canvas(6, lens.tolist())
    first = approx.canvas_logits(ctx_a, canvas, lens)  # refresh pass
    second = approx.canvas_logits(ctx_a, canvas, lens)  # served from cached K/V
    assert approx.stats.hits == 1 and approx.stats.misses == 1
    want = exact.canvas_logits(ctx_e, canvas, lens)
    assert torch.allclose(first, want, atol=1e-5) and torch.allclose(second, want, atol=1e-5)
    canvas[:, 0] = 7  # the canvas moves on: the cached context K/V is now stale (approximate)
    stale = approx.canvas_logits(ctx_a, canvas, lens)
    fresh = exact.canvas_logits(ctx_e, canvas, lens)
    assert not torch.allclose(stale, fresh, atol=1e-5)
    assert (stale - fresh).abs().max() < (fresh.abs().max())  # close, not equal
    approx.canvas_logits(ctx_a, canvas, lens)
    assert torch.allclose(approx.canvas_logits(ctx_a, canvas, lens), fresh, atol=1e-5)  # 4th pass refreshes


@pytest.mark.parametrize("family", ["sdar", "fast_dllm_v2"])
def test_block_cache_is_exact_as_blocks_finish(tmp_path, family):
    tensors = write_checkpoint(tmp_path / family, family)
    runner = FamilyRunner(load(str(tmp_path / family)))
    holes = HOLES[:2]
    ctxs = [runner.encode_context(p, s, 12) for p, s in holes]
    lens = torch.tensor([12, 12])
    canvas = _canvas(12, [12, 12])
    for step in range(3):  # finish one block per step; the cache grows and must stay exact
        got = runner.canvas_logits(ctxs, canvas, lens).double()
        for r, hole in enumerate(holes):
            want = _expected(family, tensors, hole, canvas[r].tolist(), 12)
            live = (got[r].abs().sum(-1) > 0) & (canvas[r] == MASK)  # the current block's masked slots
            assert live.any()
            assert (got[r][live] - want[live]).abs().max() < 1e-4
            done = canvas[r] != MASK  # committed slots: either exact logits or certain of their token
            probs = got[r][done].softmax(-1)
            exact = (got[r][done] - want[done]).abs().max(-1).values < 1e-4
            certain = probs.gather(-1, canvas[r][done][:, None]).squeeze(-1) > 0.999
            assert (exact | certain).all()
        first_masked = (canvas == MASK).float().argmax(-1)
        for r in range(2):
            col = first_masked[r].item()
            canvas[r, col: col + 4] = torch.arange(20, 24)  # finish (at least) the current block
    assert runner.stats.misses >= 1 and runner._cached_upto > 0  # the exact cache grew as blocks finished


def test_dreamon_edits():
    class Cfg:
        mask_token_id, eos_token_id, extra = MASK, EOS, {"expand_token_id": EXTRA}

    m = MASK
    # expand -> two masks
    assert dreamon_edit([5, EXTRA, m], [False, True, False], Cfg, 8) == [5, m, m, m]
    # EOS deletes its slot and the masks to its right, keeps committed tokens
    assert dreamon_edit([5, EOS, m, 6, m], [False, True, False, False, False], Cfg, 8) == [5, 6]
    # at the budget an expand only unmasks back to one slot
    assert dreamon_edit([EXTRA, m], [True, False], Cfg, 2) == [m, m]
    # an EOS committed earlier is not re-deleted
    assert dreamon_edit([5, 6], [False, False], Cfg, 8) == [5, 6]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_infill_round_trip(tmp_path, family):
    write_checkpoint(tmp_path / family, family)
    loaded = load(str(tmp_path / family))
    result = run_infill(FamilyRunner(loaded, refresh_every=1), HOLES, canvas_len=8, threshold=0.5)
    assert len(result.tokens) == 3 and result.passes >= 1
    ends = set(loaded.config.extra["end_ids"])
    for fill in result.tokens:
        assert len(fill) <= 8 and MASK not in fill and not ends & set(fill)
    assert sum(result.committed_per_pass) >= 1
    again = run_infill(FamilyRunner(loaded, refresh_every=1), HOLES, canvas_len=8, threshold=0.5)
    assert again.tokens == result.tokens  # deterministic at temperature 0


def test_diffucoder_pads_with_dlm_pad(tmp_path):
    write_checkpoint(tmp_path / "m", "diffucoder")
    cfg = load(str(tmp_path / "m")).config
    assert cfg.pad_token_id == EXTRA and EXTRA in cfg.extra["end_ids"]


def test_edit_canvas_hook(tmp_path):
    write_checkpoint(tmp_path / "on", "dreamon")
    write_checkpoint(tmp_path / "d", "dream")
    on = FamilyRunner(load(str(tmp_path / "on")))
    plain = FamilyRunner(load(str(tmp_path / "d")))
    canvas = torch.tensor([5, EXTRA, MASK, EOS, MASK])
    committed = torch.tensor([False, True, False, True, False])
    assert plain.edit_canvas(canvas, committed, 8) is canvas
    assert on.edit_canvas(canvas, committed, 8).tolist() == [5, MASK, MASK, MASK]
    done = on.edit_canvas(torch.tensor([5, 6]), torch.tensor([False, True]), 8)
    assert done.tolist() == [5, 6, EOS]  # full canvas: the engine's end rule finishes it
