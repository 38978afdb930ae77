"""Best of N (candidates.py, candidate_scoring.py) on a tiny random shifted-logit model decoded
in blocks of 1 (the default model's decoding), fp32: the scores are one causal forward's over
the hole's layout (the suffix, the prefix up to its last line, then the rows),
the fill kept is the best-scored of the copies the engine ran, and copy 0 is the fill without
best of N. The shipped default model's own check is in tests/bases/test_candidates_default.py."""

import math

import pytest
import torch

from dllm_engine.candidate_scoring import SUFFIX_TOKENS, score_fills
from dllm_engine.candidates import SAMPLE_PASSES_FACTOR, SAMPLE_PASSES_SLACK
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.layout import causal_mask, native_context_ids
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest, ProtocolError

PREFIX = "def count(items):\n    total = 0\n    for item in items:\n        "
SUFFIX = "\n    return total\n\n\nprint(count([1, 2]))\n"


@pytest.fixture(scope="module")
def engine(tiny_shifted_model):
    e = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1, dtype="float32", weights="native"))
    yield e
    e.shutdown()


def full_forward_score(e, prefix, fill, suffix):
    """The same quantity from one causal forward over the whole layout, no cache."""
    tok, cfg = e.tokenizer, e.loaded.config
    cut = prefix.rfind("\n")
    head = native_context_ids(tok.encode(prefix[:cut]), tok.encode(suffix), cfg)
    ids, offsets = tok.encode_with_offsets(prefix[cut:] + fill + suffix)
    start = len(prefix) + len(fill) - cut
    first = next((i for i, (s, _) in enumerate(offsets) if s >= start), len(ids))
    rows = ids[: first + SUFFIX_TOKENS]
    full = torch.tensor(head + rows)[None]
    with torch.inference_mode():
        logits, _ = e.loaded.model(full, torch.arange(full.shape[1])[None], mask=causal_mask(0, full.shape[1], full.device))
    logp = logits[0].float().log_softmax(-1)
    return sum(float(logp[len(head) + j - 1, t]) for j, t in enumerate(rows))


def test_fill_scores_are_the_models_own_left_to_right_reading(engine):
    fills = ["total += item", "print(item)", "", "if item:\n            total += 1"]
    first = engine.between_passes(lambda: score_fills(engine, PREFIX, SUFFIX, fills, 12))
    again = engine.between_passes(lambda: score_fills(engine, PREFIX, SUFFIX, fills, 12))  # the context now cached
    want = [full_forward_score(engine, PREFIX, f, SUFFIX) for f in fills]
    assert first == pytest.approx(want, abs=1e-3)
    assert again == pytest.approx(want, abs=1e-3)
    assert len(set(round(s, 3) for s in first)) == len(fills)  # the fills are told apart


def test_the_cuts_of_one_fill_share_their_rows_and_score_as_their_own_chains(engine):
    """A fill's cuts (fill_end.py) all start with the fill: scored as a tree, each is still the
    model's own left-to-right reading of it, and the rows are far fewer than one chain a cut."""
    from dllm_engine.candidate_scoring import token_tree
    from dllm_engine.fill_end import line_cuts

    cuts = line_cuts("if item:\n            total += 1\n        total -= 1\n        print(total)", with_break=False)
    assert len(cuts) == 4
    scores = engine.between_passes(lambda: score_fills(engine, PREFIX, SUFFIX, cuts, 12))
    assert scores == pytest.approx([full_forward_score(engine, PREFIX, c, SUFFIX) for c in cuts], abs=1e-3)
    rows = [engine.tokenizer.encode(PREFIX[PREFIX.rfind("\n"):] + c + SUFFIX) for c in cuts]
    tokens, _, _ = token_tree(rows)
    shared = next(i for i in range(min(map(len, rows))) if len({r[i] for r in rows}) > 1)  # the common start
    assert shared >= 3 and len(tokens) <= sum(len(r) for r in rows) - (len(rows) - 1) * shared


def test_token_tree_merges_rows_where_they_start_alike():
    from dllm_engine.candidate_scoring import token_tree

    tokens, parents, paths = token_tree([[1, 2, 3], [1, 2, 4], [1, 5], [], [1, 2, 3]])
    assert tokens == [1, 2, 3, 4, 5] and parents == [-1, 0, 1, 1, 0]
    assert paths == [[0, 1, 2], [0, 1, 3], [0, 4], [], [0, 1, 2]]


def test_scoring_reads_the_fills_own_context_from_the_cache(engine):
    """The score's context is the hole's own, cut at the prefix's last line: after the fill, its
    cached entry serves all of it, so scoring encodes nothing anew (a suffix never seen does)."""
    _fill(engine)
    stats = engine.runner.cache.stats

    def encoded(fills, suffix=SUFFIX):
        requested, reused = stats.tokens_requested, stats.tokens_reused
        engine.between_passes(lambda: score_fills(engine, PREFIX, suffix, fills, 12))
        return (stats.tokens_requested - requested) - (stats.tokens_reused - reused)

    assert encoded(["total += 1"], SUFFIX + "# a suffix seen once") > 10
    assert encoded(["total += 1", "pass"]) <= 1


def _fill(engine, candidates=1, temperature=0.0, copies=1, seed=0):
    hole = Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=12, stop=("\n",))
    params = DiffusionParams(candidates=candidates, temperature=temperature, seed=seed)
    return engine.infill(InfillRequest(holes=[hole] * copies, params=params), timeout=120)


def test_best_of_n_keeps_the_best_scored_of_the_copies_it_ran(engine):
    n = 4
    best = _fill(engine, candidates=n).holes[0]
    greedy = _fill(engine).holes[0]
    # The copies as the engine ran them: copy 0 greedy, copy 1 the branch on `total` (the name
    # the suffix returns: branches.py), greedy after it, copies k > 1 sampled with seed index k;
    # a copy that would still run SAMPLE_PASSES_* after the greedy fill ended was cut.
    allowance = SAMPLE_PASSES_FACTOR * greedy.passes + SAMPLE_PASSES_SLACK
    branch = engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX + "total", suffix=SUFFIX, max_tokens=12,
                                                     stop=("\n",))]), timeout=120).holes[0]
    sampled = _fill(engine, temperature=0.8, copies=n).holes
    kept = [("total" + branch.text, branch.passes)] + [(h.text, h.passes) for h in sampled[2:]]
    texts = list(dict.fromkeys([greedy.text] + [t for t, passes in kept if passes - 1 < allowance]))
    assert len(texts) > 1, "the samples should differ from the greedy fill on a random model"
    scores = engine.between_passes(lambda: score_fills(engine, PREFIX, SUFFIX, texts, 12))
    assert best.text == texts[max(range(len(texts)), key=lambda i: (scores[i], -i))]
    assert greedy.passes + 1 <= best.passes <= math.ceil(allowance) + 1  # + the scoring pass


def test_one_candidate_is_the_plain_fill_and_several_holes_keep_their_order(engine):
    assert _fill(engine, candidates=1).holes[0].text == _fill(engine).holes[0].text
    holes = [Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=8, stop=("\n",)),
             Hole(prefix="x = [", suffix="]\n", max_tokens=6)]
    many = engine.infill(InfillRequest(holes=holes, params=DiffusionParams(candidates=3)), timeout=120)
    assert len(many.holes) == 2
    alone = engine.infill(InfillRequest(holes=holes[1:], params=DiffusionParams(candidates=3)), timeout=120)
    assert many.holes[1].text == alone.holes[0].text


def test_best_of_n_is_refused_where_it_cannot_mean_anything(engine):
    hole = Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=8)
    for bad in (0, 9, 2.0, True):
        with pytest.raises(ProtocolError, match="candidates"):
            InfillRequest(holes=[hole], params=DiffusionParams(candidates=bad)).validate()
    with pytest.raises(ProtocolError, match="stream"):
        engine.submit(InfillRequest(holes=[hole], params=DiffusionParams(candidates=2), stream=True))
    with pytest.raises(ProtocolError, match="stream"):
        engine.submit(InfillRequest(holes=[hole], params=DiffusionParams(candidates=2)), on_settled=lambda e: None)
    with pytest.raises(ProtocolError, match="256 fills"):
        InfillRequest(holes=[hole] * 40, params=DiffusionParams(candidates=8)).validate()


def test_a_model_not_scored_left_to_right_fills_once(tiny_model):
    e = Engine(EngineConfig(model=str(tiny_model), threads=1, dtype="float32", weights="native"))
    try:
        assert not e.scores_candidates
        hole = Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=8, stop=("\n",))
        once = e.infill(InfillRequest(holes=[hole]), timeout=60).holes[0]
        asked = e.infill(InfillRequest(holes=[hole], params=DiffusionParams(candidates=4)), timeout=60).holes[0]
        assert asked == once
    finally:
        e.shutdown()


def test_a_deadline_answers_once_per_hole_with_the_plain_fill_so_far(engine):
    hole = Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=64)
    res = engine.infill(InfillRequest(holes=[hole, hole], params=DiffusionParams(candidates=4), deadline_s=0.001),
                        timeout=60)
    assert len(res.holes) == 2 and all(h.finish_reason == "deadline" for h in res.holes)
