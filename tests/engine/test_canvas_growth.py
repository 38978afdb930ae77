"""canvas_rules.advance: when a canvas grows. Once full by default; with `ahead` (blocks of 1
with drafts), as soon as a draft of `ahead` tokens and the slot after it no longer fit."""

from types import SimpleNamespace

import torch

from dllm_engine.canvas_rules import advance
from dllm_engine.denoise import SpecialIds

M, END = 99, 0
SPECIAL = SpecialIds(mask=M, end=(END,), banned=(M,))


def hole(tokens, max_tokens=32):
    return SimpleNamespace(canvas=torch.tensor(tokens), max_tokens=max_tokens, stop_ids=None)


def test_a_canvas_grows_once_full_by_default():
    a = hole([5, 6, 7, M])
    assert advance(a, SPECIAL) is None and a.canvas.numel() == 4  # a mask left: keep going
    a = hole([5, 6, 7, 8])
    assert advance(a, SPECIAL) is None and a.canvas.tolist() == [5, 6, 7, 8, M, M, M, M]  # doubled


def test_with_drafts_it_grows_as_soon_as_a_whole_draft_no_longer_fits():
    a = hole([5, 6, M, M, M, M])
    assert advance(a, SPECIAL, ahead=3) is None and a.canvas.numel() == 6  # 3 draft tokens and the slot after
    a = hole([5, 6, 7, M, M, M])
    assert advance(a, SPECIAL, ahead=3) is None
    assert a.canvas.tolist() == [5, 6, 7, M, M, M] + [M] * 6  # 3 masks left: grown early (doubled)
    a = hole([5, 6, 7, M, M], max_tokens=5)
    assert advance(a, SPECIAL, ahead=3) is None and a.canvas.numel() == 5  # at max_tokens: as it is
    a = hole([5, END, M, M, M])
    assert advance(a, SPECIAL, ahead=8) == "end" and a.canvas.tolist() == [5]  # an end: done, never grown
    a = hole([M, 5, END, M])  # (a whole-canvas block) an end with a mask before it: padding after it
    assert advance(a, SPECIAL, ahead=8) is None and a.canvas.tolist() == [M, 5, END, END]
