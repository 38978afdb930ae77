"""The default model's fill ends where the code after its hole reads best (Hole.choose_end,
fill_end.py): a multi-line fill that runs on past its hole into an example of use is cut at
the line break the suffix follows, the cut the model reads best of all the fill's cuts, for one
more pass; best of N cuts its copies too, and so does a stream, which sends the first line as it
settles. A fill that runs on stops being written once no more of it could change the end chosen
(fill_end.settled_end). Inside a line, the fill is cut before a character where it goes on as the
suffix does (fill_end.span_cuts). fp32."""

import pytest

from dllm_engine.candidate_scoring import score_fills
from dllm_engine.fill_end import MAX_CUTS, choose_end, line_cuts, span_cuts
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest


@pytest.fixture
def engine(fp32_engine):
    return fp32_engine  # tests/bases/conftest.py


PREFIX = "def mean(values):\n    if not values:\n        return 0.0\n"
SUFFIX = "    return total / len(values)\n"
RIGHT = "    return sum(values) / len(values)\n"  # what the default model writes, then goes on


def fill(engine, choose_end=True, candidates=1, on_settled=None):
    request = InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=64, choose_end=choose_end)],
                            params=DiffusionParams(candidates=candidates))
    return engine.submit(request, on_settled=on_settled).result(120).holes[0]


def test_a_fill_that_runs_past_its_hole_ends_where_the_suffix_reads_best(engine):
    free = fill(engine, choose_end=False)
    assert free.text.startswith(RIGHT) and free.text.count("\n") > 2, f"the model no longer runs on: {free.text!r}"
    chosen = fill(engine)
    assert chosen.text == RIGHT and chosen.finish_reason == "end"
    assert chosen.passes == free.passes + 1  # the reading pass
    cuts = line_cuts(free.text)
    scores = engine._calls.call(lambda: score_fills(engine, PREFIX, SUFFIX, cuts, 64))
    assert max(range(len(cuts)), key=scores.__getitem__) == cuts.index(RIGHT)


def test_best_of_n_chooses_among_its_copies_cuts(engine):
    best = fill(engine, candidates=2)
    assert best.text == RIGHT and best.finish_reason == "end"


def test_a_streamed_fill_is_cut_too_and_sent_its_first_line_as_it_settles(engine):
    from dllm_engine.openai_api.streaming import FillStream

    hole = Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=64)
    stream, sent = FillStream.for_hole(hole), []
    streamed = fill(engine, on_settled=lambda event: sent.append(stream.settled(event.text)))
    assert streamed.text == RIGHT
    assert "".join(sent) == RIGHT  # the first line, as it settled: the whole of this fill's chosen end
    assert stream.final(streamed.text) == ""


@pytest.mark.parametrize("prefix, right", [
    (PREFIX, "    return sum(values)\n"),
    ("def is_even(n):\n", "    return n % 2 == 0\n"),
])
def test_at_the_files_end_a_fill_ends_where_the_base_ends_the_file(engine, prefix, right):
    """No code after the hole: the model goes on past its function (an example of use, comments),
    and the cuts are read with the base's end of a file after them (candidate_scoring)."""
    def at_end(choose_end):
        hole = Hole(prefix=prefix, suffix="", max_tokens=64, choose_end=choose_end)
        return engine.infill(InfillRequest(holes=[hole])).holes[0]

    free = at_end(False)
    assert free.text.startswith(right) and free.text.count("\n") > 2, f"the model no longer runs on: {free.text!r}"
    chosen = at_end(True)
    assert chosen.text == right and chosen.finish_reason == "end"
    assert chosen.passes <= free.passes + 1  # the reading pass, less those after the fill settled (settled_cut)


def test_a_fill_stops_once_more_text_could_not_change_its_chosen_end(engine):
    """The end is chosen among the fill's first MAX_CUTS line breaks: a fill that loops on for
    lines is not written past the line after them, and the same cut is kept."""
    hole = Hole(prefix="def parse_config(path):\n    config = {}\n", suffix="    return config\n", max_tokens=128)

    def run(choose_end):
        request = InfillRequest(holes=[Hole(prefix=hole.prefix, suffix=hole.suffix, max_tokens=128,
                                            choose_end=choose_end)])
        return engine.infill(request).holes[0]

    free = run(False)
    assert free.text.count("\n") > MAX_CUTS + 1, f"the model no longer runs on: {free.text!r}"
    chosen = run(True)
    assert chosen.text == engine._calls.call(lambda: choose_end(engine, hole, free)).text
    assert chosen.text.count("\n") < MAX_CUTS and chosen.finish_reason == "end"
    assert chosen.tokens < free.tokens and chosen.passes < free.passes  # the passes after the settled line never ran


@pytest.mark.parametrize("prefix, suffix, right", [
    ("def count_words(text):\n    words = text.split()\n    return len(", ") if words else 0\n", "words"),
    ("def positives(items):\n    return [x for x in ", " if x > 0]\n", "items"),
])
def test_inside_a_line_a_fill_ends_where_it_goes_on_as_the_suffix_does(engine, prefix, suffix, right):
    """The hole ends inside a line: the model writes the middle and runs on past the code after
    it into an example of use; the fill is cut before the suffix's first character where that
    reads best."""
    def run(choose_end):
        return engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=64,
                                                        choose_end=choose_end)])).holes[0]

    free = run(False)
    assert free.text.startswith(right) and free.text.count("\n") > 2, f"the model no longer runs on: {free.text!r}"
    assert right in span_cuts(free.text, suffix)
    chosen = run(True)
    assert chosen.text == right and chosen.finish_reason == "end"
    assert chosen.passes <= free.passes + 1  # the reading pass, less those after the fill settled


def test_a_streamed_fill_inside_a_line_sends_what_every_cut_keeps(engine):
    """A stream of a fill that ends inside a line sends its text up to the first character that
    is the suffix's first as it settles (every cut keeps that much), the rest once the cut is
    chosen: what was sent is the chosen fill's start, never text after its end."""
    from dllm_engine.openai_api.streaming import FillStream

    hole = Hole(prefix="def positives(items):\n    return [x for x in ", suffix=" if x > 0]\n", max_tokens=64)
    stream, sent = FillStream.for_hole(hole), []
    chosen = engine.submit(InfillRequest(holes=[hole]),
                           on_settled=lambda event: sent.append(stream.settled(event.text))).result(120).holes[0]
    assert chosen.text == "items"
    assert "".join(sent) == "items"  # up to the fill's first blank: this fill's chosen end
    assert stream.final(chosen.text) == ""
