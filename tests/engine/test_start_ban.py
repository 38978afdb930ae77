"""Hole.banned_starts (start_ban.py): the token masks, where the ban applies (compact rows,
full logits, slots checked after drafts), validation at the boundary, and real fills that no
longer start with what they started with, the other holes of the batch untouched."""

import pytest
import torch

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.http_schemas import InfillBody
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest, ProtocolError
from dllm_engine.start_ban import StartBans, starts_banned

MASK = 9
TEXTS = ["", "\n", "    ", "\n        ", '"""', '\n    """', "#", " # x", "return", " r", 'r"', "x", "'", "self"]


def bans() -> StartBans:
    return StartBans(TEXTS, len(TEXTS) + 2, "cpu")  # two ids past the texts: never written


def test_the_token_masks():
    b = bans()
    assert b.blank.tolist() == [True, True, True, True] + [False] * 12
    banned = b.vocab(('"', "'", "#"))
    assert [TEXTS[i] for i in banned.nonzero().squeeze(-1).tolist()] == ['"""', '\n    """', "#", " # x", "'"]
    assert not b.vocab(('"',))[TEXTS.index(" r")], "the start of a banned string is not banned"
    assert b.vocab(('r"',))[TEXTS.index('r"')]
    assert starts_banned('\n    """x', ('"',)) and not starts_banned("x = '", ("'",)) and not starts_banned('"', ())


def test_the_ban_applies_only_where_blanks_come_before():
    b = bans()
    v = len(TEXTS) + 2
    banned = b.vocab(('"', "#"))
    # row 0: blank, then masks; row 1: text first; row 2: not banned
    canvases = torch.tensor([[1, MASK, MASK, MASK], [TEXTS.index("x"), MASK, MASK, MASK], [MASK, MASK, MASK, MASK]])
    masked = canvases == MASK
    full = torch.zeros(3, 4, v)
    b.apply(full, canvases, masked, MASK, {0: banned, 1: banned}, compact=False)
    hit = torch.isinf(full).any(-1)
    assert hit.tolist() == [[False, True, True, True], [False, False, False, False], [False] * 4]
    assert torch.isinf(full[0, 1][banned]).all() and not torch.isinf(full[0, 1][~banned]).any()
    compact = torch.zeros(int(masked.sum()), v)  # the masked slots, row by row
    b.apply(compact, canvases, masked, MASK, {0: banned, 1: banned}, compact=True)
    assert torch.isinf(compact).any(-1).tolist() == [True] * 3 + [False] * 3 + [False] * 4


def test_a_slot_checked_after_drafts_reads_them_as_text():
    b = bans()
    banned = b.vocab(('"',))
    # the current slot 1, drafts at 1-2 ("\n" then "x"): slot 2 comes after blanks, slot 3 after text
    seen = torch.tensor([[2, 1, TEXTS.index("x"), MASK]])
    slots = torch.tensor([[False, True, True, True]])
    logits = torch.zeros(3, len(TEXTS) + 2)
    b.apply(logits, seen, slots, MASK, {0: banned}, compact=True)
    assert torch.isinf(logits).any(-1).tolist() == [True, True, False]


def test_the_ban_lasts_while_a_masked_slot_has_only_blanks_before_it():
    b = bans()
    x = TEXTS.index("x")
    assert b.live(torch.tensor([1, MASK, MASK]), MASK)  # a blank, then the start to come
    assert b.live(torch.tensor([MASK, MASK, x]), MASK)  # a whole-canvas decoder wrote a later slot first
    assert not b.live(torch.tensor([1, x, MASK]), MASK)  # the fill began with text: done
    assert not b.live(torch.tensor([1, 2, 3]), MASK)  # nothing masked


def test_bad_banned_starts_are_refused_at_the_boundary():
    for bad in (["   "], [""], ["x" * 17], ["#"] * 33, [1], "#"):
        with pytest.raises(ProtocolError, match="banned_starts"):
            Hole(prefix="x", banned_starts=bad).validate()
        with pytest.raises(Exception):
            InfillBody.model_validate({"holes": [{"prefix": "x", "banned_starts": bad}]})
    body = InfillBody.model_validate({"holes": [{"prefix": "x", "banned_starts": ['"', "#"]}]})
    assert body.holes[0].build().banned_starts == ('"', "#")
    req = InfillRequest(holes=[Hole(prefix="x", banned_starts=('"', "#"))])
    assert InfillRequest.from_dict(req.to_dict()).holes[0].banned_starts == ('"', "#")  # the daemon's wire form


# Empty bodies the small model fills (greedy); each fill's own start is banned in turn.
BODIES = [("def load(path):\n    ", "\n"), ("class Point:\n    def __init__(self, x, y):\n        ", "\n"),
          ("def main():\n    ", "\n\n\nif __name__ == '__main__':\n    main()\n")]


@pytest.mark.parametrize("canvas_cache", ["exact", "delayed"])
def test_a_real_fill_no_longer_starts_with_what_is_banned(canvas_cache):
    engine = Engine(EngineConfig(model="small", threads=1))
    params = DiffusionParams(canvas_cache=canvas_cache)
    try:
        def fills(holes):
            return [h.text for h in engine.infill(InfillRequest(holes=holes, params=params)).holes]

        plain = fills([Hole(prefix=p, suffix=s, max_tokens=24) for p, s in BODIES])
        for (prefix, suffix), text in zip(BODIES, plain):
            start = text.lstrip()[:2]
            assert start.strip(), f"the small model wrote nothing: {text!r}"
            other = Hole(prefix=BODIES[0][0] if prefix != BODIES[0][0] else BODIES[1][0], suffix="\n", max_tokens=24)
            banned, beside = fills([Hole(prefix=prefix, suffix=suffix, max_tokens=24, banned_starts=(start,)), other])
            assert banned.strip() and not banned.lstrip().startswith(start), (start, banned)  # something else
            alone = fills([other])[0]
            assert beside == alone, "a ban on one hole moved the fill of another in its batch"
    finally:
        engine.shutdown()
