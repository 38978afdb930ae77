"""Infill round trip through the resident engine with third-party family checkpoints.

The engine builds its runner with `families.family_runner.make_runner`.
"""

from __future__ import annotations

import pytest

from ckpt_writers import FAMILY_NAMES, write_checkpoint
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.families.family_runner import FamilyRunner
from dllm_engine.protocol import Hole, InfillRequest


@pytest.fixture
def family_engine(tmp_path):
    engines = []

    def start(family):
        write_checkpoint(tmp_path / family, family)
        eng = Engine(EngineConfig(model=str(tmp_path / family), device="cpu", dtype="float32", buckets=(4, 8)))
        engines.append(eng)
        return eng

    yield start
    for eng in engines:
        eng.shutdown()


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_engine_infill_round_trip(family_engine, family):
    eng = family_engine(family)
    assert isinstance(eng.runner, FamilyRunner)
    req = InfillRequest(holes=[Hole(prefix="w5 w17 w33 w2", suffix="w8 w44", max_tokens=8),
                               Hole(prefix="w40", suffix="w9 w88 w1", max_tokens=8)])
    result = eng.infill(req, timeout=120)
    assert len(result.holes) == 2
    for hole in result.holes:
        assert hole.finish_reason in ("end", "max_tokens")
        assert hole.passes >= 1 and 0 <= hole.tokens <= 8
        assert "<|mask|>" not in hole.text and "|<MASK>|" not in hole.text and "<|mdm_mask|>" not in hole.text
    assert eng.health()["status"] == "ok"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_banned_start_holds_for_every_family(family_engine, family):
    """Hole.banned_starts through each family's own layout and logits (full or compact rows,
    block decoding): the fill's own first word, banned, is never where it starts. (The prefix
    ends in a blank: after a word the fill would continue it, which no ban touches.)"""
    eng = family_engine(family)
    hole = Hole(prefix="w5 w17 w33 w2 ", suffix="w8 w44", max_tokens=8)
    plain = eng.infill(InfillRequest(holes=[hole]), timeout=120).holes[0].text
    words = plain.split()
    assert words, f"{family}'s tiny checkpoint wrote nothing here: choose another hole"
    banned = eng.infill(InfillRequest(holes=[Hole(prefix=hole.prefix, suffix=hole.suffix, max_tokens=8,
                                                  banned_starts=(words[0],))]), timeout=120).holes[0].text
    assert banned.strip() and not banned.lstrip().startswith(words[0]), (family, plain, banned)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_pass_runs_with_the_mmap_threshold_raised(family_engine, family, monkeypatch):
    """A family's pass runs over the whole context: where the process fixed glibc's mmap threshold
    low (the server, the daemon), each pass raises it and puts it back (dllm_engine/mmap_threshold.py;
    mallopt recorded, not called)."""
    from dllm_engine import mmap_threshold

    calls = []
    monkeypatch.setattr(mmap_threshold, "mallopt", lambda param, value: calls.append(value) or True)
    monkeypatch.setattr(mmap_threshold, "_fixed", 256 * 1024)
    eng = family_engine(family)
    result = eng.infill(InfillRequest(holes=[Hole(prefix="w5 w17 w33 w2", suffix="w8 w44", max_tokens=8)]), timeout=120)
    passes = result.holes[0].passes
    assert calls == [mmap_threshold.RAISED, 256 * 1024] * (len(calls) // 2) and len(calls) // 2 >= passes, calls
