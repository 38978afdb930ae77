"""Next edit on the default model: one left-to-right stream over the region (region_pass.py)
shares one cached context between the scoring window and every span.

fp32, so "the same tokens" is exact (bf16 GEMMs may round differently with more rows)."""

import dataclasses
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


@pytest.fixture
def engine(fp32_engine):
    return fp32_engine  # tests/bases/conftest.py


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


def test_scoring_stops_before_until_and_the_text_before_the_edit_is_read_only_when_a_token_is_suspect(engine):
    lo, hi = RENAMED.index("def count_words"), RENAMED.index("def main")
    region = RENAMED[lo:hi]
    rp = RegionPass(engine, RENAMED[:lo], region, RENAMED[hi:])
    until = region.index("with open")
    scored = rp.score(region, 0, 500, until=until)
    assert scored and all(s < until for s, _, _, _ in scored)
    assert scored[-1][1] >= until - 1  # every token up to there
    from dllm_engine.next_edit import streamed

    at = RENAMED.index("least")
    request = NextEditRequest(document=RENAMED, edits=[RecentEdit(offset=at, removed="minimum", inserted="least")],
                              region_start_line=RENAMED[:lo].count("\n"), region_end_line=RENAMED[:hi].count("\n"),
                              cursor=at + 5, suspicious_below=1e-12)
    rp = RegionPass(engine, RENAMED[:lo], region, RENAMED[hi:], origin=lo)
    assert streamed.score_after_edit(rp, RENAMED, lo, hi, request) == []
    assert rp.forwards == 1  # nothing under the threshold: the old text is not scored at all
    rp = RegionPass(engine, RENAMED[:lo], region, RENAMED[hi:], origin=lo)
    loose = streamed.score_after_edit(rp, RENAMED, lo, hi, dataclasses.replace(request, suspicious_below=0.5))
    assert rp.forwards == 2 and all(lo <= s and e <= hi and p < 0.5 for s, e, p, _ in loose)


def test_a_call_far_from_the_renamed_def_reads_the_edit_first_and_follows_it(engine, monkeypatch):
    """The region is around the call (the server's jump: the def is out of its reach); the
    stream reads the edited `def` line ahead of its context, so the new name is there to copy:
    the model's probability of it is ~10x what it is without (0.077 vs 0.0074 here)."""
    from dllm_engine.next_edit import service
    from dllm_engine.next_edit.spans import edit_seeds, region_bounds

    filler = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(30))
    doc = ("def count_tokens(path):\n    with open(path) as fh:\n        return len(fh.read().split())\n\n\n"
           + filler + "def main():\n    print(count_words('a.txt'))\n")
    request = NextEditRequest(document=doc, edits=[RecentEdit(offset=4, removed="count_words", inserted="count_tokens")],
                              region_start_line=doc.count("\n") - 2, region_end_line=doc.count("\n"),
                              cursor=doc.index("count_words"))
    lo, hi = region_bounds(doc, request.region_start_line, request.region_end_line)
    assert lo - service.STREAM_PREFIX_CHARS > 4  # the stream's own context does not reach the def
    seeds = edit_seeds(doc, request.edits, lo, hi)
    assert service._unseen_edit(doc, lo, request.last_edit, seeds) == "def count_tokens(path):\n"
    read = engine.next_edit(request)
    assert [(s.original, s.new) for s in read.spans] == [("count_words", "count_tokens")]
    monkeypatch.setattr(service, "_unseen_edit", lambda *a: "")
    unread = engine.next_edit(request)
    assert [s.new for s in unread.spans] == ["count_tokens"]  # the same suggestion, read as the edit says
    assert read.spans[0].confidence > 5 * unread.spans[0].confidence


def test_guessed_spans_share_a_budget_of_forwards_and_are_kept_when_it_runs_out(engine, monkeypatch):
    from dllm_engine.next_edit import region_pass

    lo, hi = RENAMED.index("def count_words"), RENAMED.index("def main")
    region = RENAMED[lo:hi]
    names = [region.index(w) for w in ("total = 0", "fh:", "words = line", "len(words)")]
    spans = [PassSpan(at, region.index(" ", at) if region[at:at + 3] != "fh:" else at + 2, True, 1, word=True,
                      guessed=True) for at in names]
    free = RegionPass(engine, RENAMED[:lo], region, RENAMED[hi:])
    unbounded = free.rewrite([PassSpan(s.start, s.end, True, 1, word=True) for s in spans])
    monkeypatch.setattr(region_pass, "GUESSED_FORWARDS", 1)
    rp = RegionPass(engine, RENAMED[:lo], region, RENAMED[hi:])
    fills = rp.rewrite(spans)
    assert rp.guess_budget <= 0 and rp.forwards <= free.forwards
    # The first guessed span had the budget's one forward; every later one is kept without a forward.
    assert [f.finish for f in fills[1:]] == ["kept"] * 3
    assert all(f.text == region[f.start:f.end] for f in fills[1:])
    assert len(unbounded) == len(fills)
