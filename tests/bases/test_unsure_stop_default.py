"""Hole.min_token_prob on the default model's decoding: a pass commits its token and the drafts
the model agreed with (drafting.py), and each drafted token is judged by the probability the
model gave it, as if it had come alone. fp32 with dense weights, so "the same" is exact."""

import pytest

from dllm_engine.protocol import Hole, InfillRequest

# The fill repeats a line of the prefix: the lookup drafts it. The last ends in a new line's
# indentation (a healed first token).
PREFIXES = ["total = compute(alpha, beta, gamma)\nother = compute(alpha, beta, gamma)\nthird = compute(",
            "names = [item.name for item in items]\nsizes = [item.name for item in items]\nkinds = [",
            "def scale(points, factor):\n    out = []\n    for p in points:\n        "]


@pytest.fixture(scope="module")
def engines():
    from dllm_engine.engine import Engine, EngineConfig

    made = {drafts: Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native",
                                        draft_tokens=drafts)) for drafts in (0, 3)}
    # a draft tree (draft_tree.py): a token that came through a branch is judged by its own row's probability
    made["tree"] = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native",
                                       draft_tree_tokens=6, draft_branches=2))
    yield made
    for e in made.values():
        e.shutdown()


def _fill(engine, prefix, floor):
    return engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix="\n\nprint(total)\n", max_tokens=32,
                                                   stop=("\n",), min_token_prob=floor)])).holes[0]


def test_drafted_tokens_are_judged_by_their_own_probabilities(engines):
    fewer_passes = unsure = 0
    for prefix in PREFIXES:
        for floor in (None, 0.3, 0.6, 0.9, 0.99):
            alone, drafted = _fill(engines[0], prefix, floor), _fill(engines[3], prefix, floor)
            tree = _fill(engines["tree"], prefix, floor)
            assert (drafted.text, drafted.finish_reason) == (alone.text, alone.finish_reason), (prefix, floor)
            assert (tree.text, tree.finish_reason) == (alone.text, alone.finish_reason), (prefix, floor)
            fewer_passes += drafted.passes < alone.passes and tree.passes < alone.passes
            unsure += drafted.finish_reason == "unsure"
    assert fewer_passes, "no draft was accepted: the test no longer covers drafted tokens"
    assert unsure, "no fill was unsure: the test no longer covers the rule"
