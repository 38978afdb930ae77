"""Next edit on the default model: one left-to-right stream over the region (region_pass.py)
shares one cached context between the scoring window and every span.

fp32, so "the same tokens" is exact (bf16 GEMMs may round differently with more rows)."""

import math

import pytest

from dllm_engine.next_edit import NextEditRequest, RecentEdit
from dllm_engine.next_edit.region_pass import PassSpan, RegionPass, supports
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest

BEFORE = '''import os


def count_words(path, minimum):
    total = 0
    with open(path) as fh:
        for line in fh:
            words = line.split()
            if len(words) >= minimum:
                total += len(words)
    return total


def main():
    print(count_words("a.txt", 3))
'''
RENAMED = BEFORE.replace("def count_words(path, minimum)", "def count_words(path, least)")


@pytest.fixture(scope="module")
def engine():
    from dllm_engine.engine import Engine, EngineConfig

    e = Engine(EngineConfig(model="default", threads=1, dtype="float32"))
    yield e
    e.shutdown()


def _request(doc: str) -> NextEditRequest:
    at = doc.index("least")
    return NextEditRequest(document=doc, edits=[RecentEdit(offset=at, removed="minimum", inserted="least")],
                           region_start_line=0, region_end_line=doc.count("\n"), cursor=at + 5)


def test_the_default_model_takes_the_stream(engine):
    assert supports(engine)


def test_a_span_is_the_models_own_greedy_fill_of_that_hole_up_to_where_it_rejoins(engine):
    lo = RENAMED.index("def count_words")
    hi = RENAMED.index("def main")
    region = RENAMED[lo:hi]
    at = region.index("if len(words)")
    span_start = region.index("minimum", at)
    rp = RegionPass(engine, RENAMED[:lo], region, RENAMED[hi:])
    [fill] = rp.rewrite([PassSpan(span_start, span_start + len("minimum"), True, 1, word=True)])
    assert fill.finish == "rejoined"
    hole = Hole(prefix=RENAMED[:lo] + region[:fill.start], suffix=RENAMED[hi:], max_tokens=8, stop=("\n",))
    alone = engine.infill(InfillRequest(holes=[hole], params=DiffusionParams())).holes[0].text
    # The stream is the hole's own context and decoding: the fill is where the hole's greedy
    # text stops being the span (the rest of the line is the known text it rejoined).
    assert alone.startswith(fill.text)
    assert alone[len(fill.text):] == region[fill.end:region.index("\n", fill.end)]
    assert rp.forwards <= 3  # the known text in bulk, then the fill and its rejoin drafted together


def test_a_rename_is_followed_at_its_use_and_the_next_keystroke_reuses_the_context(engine):
    cache = engine.runner.cache
    first = engine.next_edit(_request(RENAMED))
    assert [(s.original, s.new, s.source) for s in first.spans] == [("minimum", "least", "edit")]
    assert 0.3 < first.spans[0].confidence <= 1.0
    assert first.region_text == RENAMED.replace(">= minimum", ">= least")
    reused = cache.stats.tokens_reused
    again = engine.next_edit(_request(RENAMED))
    assert [(s.original, s.new) for s in again.spans] == [("minimum", "least")]
    # Every token up to the fill was cached by the first request: the context, the region
    # and the scored window are not encoded again.
    assert cache.stats.tokens_reused - reused > len(engine.tokenizer.encode(RENAMED[:RENAMED.index(">= minimum")]))


def test_rejoining_is_read_as_text_and_a_name_is_refilled_by_a_name(engine):
    rp = RegionPass(engine, "", "x = a + 1\n", "")
    enc = engine.tokenizer.encode
    assert rp._rejoin(enc("total + 1\n"), " + 1\n", 1, set()) == 1
    assert rp._rejoin(enc("total"), " + 1\n", 1, set()) is None
    assert rp._runs_past_name(enc("total, 2"), " + 1\n")
    assert not rp._runs_past_name(enc("total +"), " + 1\n")
    assert rp._breaks_line(enc("total\n"), " + 1\n", 1)
    assert not rp._breaks_line(enc("total:\n"), ":\n", 1)


def test_the_whole_region_baseline_runs_on_the_stream(engine):
    doc = "def area(width, h):\n    s = w * h\n    return s\n"
    at = doc.index("width")
    result = engine.next_edit(NextEditRequest(document=doc, edits=[RecentEdit(at, "w", "width")], mode="whole_region",
                                              region_start_line=0, region_end_line=3, cursor=at + 5))
    assert result.masked_spans == 1 and result.scored_tokens == 0  # the lines after the edited one
    new = doc
    for s in reversed(result.spans):  # every change is a span of the lines it re-masked, applied in place
        assert s.start >= doc.index("\n") and doc[s.start:s.end] == s.original
        new = new[:s.start] + s.new + new[s.end:]
    assert result.region_text == new


def test_stale_uses_are_read_as_the_new_name_together_at_the_models_probability(engine):
    """Each stale use's fill is the new name, its confidence the model's probability of it and
    of the token it joins (the threshold judges it), all read in one forward over the region."""
    doc = RENAMED.replace("total += len(words)", "total += len(words) * minimum")
    lo, hi = doc.index("def count_words"), doc.index("def main")
    region = doc[lo:hi]
    uses = [i for i in range(len(region)) if region.startswith("minimum", i)]
    assert len(uses) == 2
    rp = RegionPass(engine, doc[:lo], region, doc[hi:])
    fills = rp.rewrite([PassSpan(u, u + 7, True, 1, guess="least", word=True) for u in uses])
    assert rp.forwards == 1 and [f.text.strip() for f in fills] == ["least", "least"]
    # The same probabilities, read token by token off the region as it reads with the new name.
    new = region.replace("minimum", "least")
    alone = RegionPass(engine, doc[:lo], new, doc[hi:])
    scored = alone.score(new, 0, len(alone.ids))
    for fill, shift in zip(fills, (0, len("least") - len("minimum"))):
        a, b = fill.start + shift, fill.start + shift + len(fill.text)
        probs = [p for s, e, p, _ in scored if s >= a and e <= b]
        probs.append(next(p for s, e, p, _ in scored if s >= b))  # the token it joins
        expected = math.exp(sum(math.log(p) for p in probs) / len(probs))
        assert fill.confidence == pytest.approx(expected, rel=1e-3)
