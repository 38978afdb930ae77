"""Where a multi-line fill ends (fill_end.py): the cuts tried, when the end is chosen, and that
the best-read cut is kept, with a scorer standing in for the model (the default model's own
check is tests/bases/test_fill_end_default.py)."""

import pytest

from dllm_engine import fill_end
from dllm_engine.fill_end import (INSIDE, MAX_CUTS, SPAN_CUTS, choose_end, chosen_end, cuts_for, end_candidates,
                                  hole_end, kept_by_every_cut, leaves_open, line_cuts, settled_cut, settled_end,
                                  span_cuts)
from dllm_engine.protocol import Hole, HoleResult, ProtocolError

HOLE = Hole(prefix="def mean(values):\n    values = list(values)\n", suffix="    print(values)\n")  # ends at a line start


def result(text, reason="max_tokens", passes=10):
    return HoleResult(text=text, finish_reason=reason, passes=passes, tokens=len(text))


def test_a_fill_is_cut_at_each_line_break_then_kept_whole():
    assert line_cuts("a\nb\nc") == ["a\n", "a\nb\n", "a\nb\nc"]
    assert line_cuts("a\n\nb\n") == ["a\n", "a\n\n", "a\n\nb\n"]  # a fill that ends at a break: no extra whole
    assert line_cuts("a\n") == [] and line_cuts("abc") == [] and line_cuts("") == []  # nothing to choose
    # Before each break, where the suffix brings its own.
    assert line_cuts("a\nb\nc", with_break=False) == ["a", "a\nb", "a\nb\nc"]
    assert line_cuts("a\n", with_break=False) == ["a", "a\n"]
    assert line_cuts("\na", with_break=False) == []  # nothing before the first break
    long = "".join(f"x{i}\n" for i in range(20)) + "tail"
    cuts = line_cuts(long)
    assert len(cuts) == MAX_CUTS + 1 and cuts[-1] == long and cuts[MAX_CUTS - 1].count("\n") == MAX_CUTS


def test_a_fill_is_settled_once_its_last_cut_and_the_line_after_it_are_written():
    lines = [f"    x{i} = {i}\n" for i in range(MAX_CUTS + 3)]
    text = "".join(lines)
    last = len("".join(lines[:MAX_CUTS]))  # just past the last break a cut is tried at
    for n in range(last + len(lines[MAX_CUTS])):  # the line after it not yet complete: not settled
        assert settled_cut(text[:n]) == -1
    assert settled_cut(text) == settled_cut(text[:last + len(lines[MAX_CUTS])]) == last + len(lines[MAX_CUTS]) - 1
    # Blank lines after the last cut are not the line its reading needs.
    blanks = "".join(lines[:MAX_CUTS]) + "\n  \n" + "    y = 1\n"
    assert settled_cut(blanks) == len(blanks) - 1 and settled_cut(blanks[:-1]) == -1
    # Cut there, the fill's cuts are the same as the whole fill's but for its whole.
    cut = text[:settled_cut(text) + 1]
    assert line_cuts(cut)[:MAX_CUTS] == line_cuts(text)[:MAX_CUTS] and line_cuts(cut)[-1] == cut
    assert [leaves_open(HOLE, cut, c) for c in line_cuts(cut)[:MAX_CUTS]] == \
        [leaves_open(HOLE, text, c) for c in line_cuts(text)[:MAX_CUTS]]
    assert settled_cut(text, limit=2) == len("".join(lines[:3])) - 1


def test_a_holes_end_is_chosen_where_asked_and_its_length_is_free():
    assert chosen_end(HOLE) == "line start"
    assert chosen_end(Hole(prefix="x", suffix="\nreturn 1\n")) == "line end"
    assert chosen_end(Hole(prefix=HOLE.prefix, suffix=HOLE.suffix, choose_end=False)) is None
    assert chosen_end(Hole(prefix=HOLE.prefix, suffix=HOLE.suffix, max_tokens=9, bucket=9)) is None  # fixed
    assert chosen_end(Hole(prefix="x = ", suffix="y)\n")) == INSIDE


def test_where_the_hole_ends_is_read_from_the_suffix_and_the_prefixs_indentation():
    def end(suffix, prefix="def f(x):\n    if x:\n        y = 1\n"):
        return hole_end(Hole(prefix=prefix, suffix=suffix))

    assert end("\n    return x\n") == "line end" and end("\r\nx") == "line end"
    assert end("    return x\n") == "line start" and end("        return x\n") == "line start"
    assert end("\treturn x\n", prefix="def f():\n\tpass\n") == "line start"
    # Deeper than the prefix's last line: the body of a block the fill opens.
    assert end("            print(y)\n") == "line start"
    assert end(" 1)\n", prefix="x = f(\n") == INSIDE  # one blank: inside a line
    assert end("eter)\n    return x\n") == INSIDE  # code: inside a line
    assert end(" < threshold:\n") == INSIDE and end("  + 1\n") == INSIDE  # blanks no line is indented by
    # no code after the hole (the file's end): a cut keeps its break unless the suffix brings one
    assert end("") == "line start" and end("  ") == "line start" and end("\n  \n") == "line end"


def test_the_end_is_chosen_only_for_a_finished_fill_with_a_line_break_before_code_that_fits():
    assert cuts_for(HOLE, result("a\nb")) == ["a\n", "a\nb"]
    assert cuts_for(Hole(prefix="x", suffix="\nreturn 1\n"), result("a\nb")) == ["a", "a\nb"]
    assert cuts_for(HOLE, result("a\n\n")) == ["a\n", "a\n\n"]
    assert cuts_for(HOLE, result("a\n")) == []  # one line
    assert cuts_for(Hole(prefix="x = ", suffix=""), result("a\nb")) == ["a\n", "a\nb"]  # the file's end
    assert cuts_for(Hole(prefix="x = ", suffix="\n"), result("a\nb")) == ["a", "a\nb"]
    assert cuts_for(Hole(prefix="x = ", suffix="y)\n"), result("a\nb")) == []  # inside a line: no `y` to cut before
    assert cuts_for(Hole(prefix="x = ", suffix="y)\n"), result("a + y\nb")) == ["a + ", "a + y\nb"]
    assert cuts_for(Hole(prefix=HOLE.prefix, suffix="    y\n", choose_end=False), result("a\nb")) == []
    assert cuts_for(Hole(prefix=HOLE.prefix, suffix="    y\n", max_tokens=9, bucket=9), result("a\nb")) == []  # fixed
    assert cuts_for(Hole(prefix=HOLE.prefix, suffix="    y\n", max_tokens=64, bucket=8), result("a\nb")) == ["a\n", "a\nb"]
    for reason in ("unsure", "deadline", "cancelled"):
        assert cuts_for(HOLE, result("a\nb", reason)) == []


def test_inside_a_line_a_fill_is_cut_where_it_goes_on_as_the_suffix_does():
    # Before each character that is the suffix's first, never before the fill's own first.
    assert span_cuts("eter)\n\n    return result\n", "mbers[-1])\n") == []  # no `m` in it
    fill = "len(items)) * 2\n    return n"
    assert span_cuts(fill, ") // 2\n") == ["len(items", "len(items)", fill]
    assert span_cuts("  x = 1", " y") == [" ", "  x", "  x =", "  x = 1"]  # the fill's own first blank is no cut
    assert span_cuts("abc", "") == []  # no suffix: no character to meet
    # Before the first SPAN_CUTS such characters only (and whole), however far apart.
    long = "a" * (SPAN_CUTS + 50)
    cuts = span_cuts(long, "a")
    assert len(cuts) == SPAN_CUTS + 1 and cuts[-2] == long[:SPAN_CUTS] and cuts[-1] == long
    far = "x" * 500 + ")"
    assert span_cuts(far, ")") == ["x" * 500, far]  # a long middle before the suffix's `)`


def test_a_fill_ending_inside_a_line_is_settled_at_the_character_after_its_last_cut():
    text = "f(a) + g(b) + " * 40
    closers = [i for i, c in enumerate(text) if c == ")"]
    assert settled_end(text[:closers[SPAN_CUTS]], INSIDE, ")") == -1  # its last cut is there: not yet
    assert settled_end(text, INSIDE, ")") == settled_end(text[:closers[SPAN_CUTS] + 1], INSIDE, ")") == closers[SPAN_CUTS]
    assert settled_end("x" * 1000, INSIDE, ")") == -1  # no such character: never settled, the room ends it
    # Cut there, its cuts are the whole fill's, and its whole the one after them.
    cut = text[:settled_end(text, INSIDE, ")")]
    assert span_cuts(cut, ")")[:-1] == span_cuts(text, ")")[:-1] and span_cuts(cut, ")")[-1] == cut
    # At a line break, the line start's cut keeps its break.
    lines = "".join(f"    x{i} = {i}\n" for i in range(MAX_CUTS + 3))
    assert settled_end(lines, "line start", "") == settled_cut(lines) + 1
    assert settled_end(lines, "line end", "\n") == settled_cut(lines)
    assert settled_end("a\nb", "line end", "\n") == -1


def test_a_stream_sends_what_every_cut_keeps():
    assert kept_by_every_cut("x = 1\ny = 2", "line start", "") == "x = 1\n"
    assert kept_by_every_cut("x = 1\ny = 2", "line end", "\n") == "x = 1"
    assert kept_by_every_cut("x = 1", "line end", "\n") == "x = 1"  # no break yet: a cut after it all
    assert kept_by_every_cut("range(n)) + 1", INSIDE, ")") == "range(n"
    assert kept_by_every_cut(")) + 1", INSIDE, ")") == ")"  # never before the first character
    assert kept_by_every_cut("range", INSIDE, ")") == "range"  # the next character may be the suffix's
    assert kept_by_every_cut("x" * 900, INSIDE, ")") == "x" * 900


def test_a_cut_that_leaves_its_last_line_open_is_not_tried():
    body = Hole(prefix="class A:\n    def f(self, items):\n        ", suffix="\n\n    def g(self):\n        pass\n")
    fill = "for item in items:\n            if item:\n                yield item\n        return None"
    # The lone `for` line and the lone `if` line would open a block the code after the hole does not fill.
    assert leaves_open(body, fill, "for item in items:") and leaves_open(body, fill, "for item in items:\n            if item:")
    assert not leaves_open(body, fill, "for item in items:\n            if item:\n                yield item")
    assert not leaves_open(body, fill, fill)  # the whole fill: nothing after it
    assert cuts_for(body, result(fill)) == ["for item in items:\n            if item:\n                yield item", fill]
    # A call left open at its line break is open too.
    call = "x = f(\n            1)\n        return x"
    assert cuts_for(body, result(call)) == ["x = f(\n            1)", call]
    assert cuts_for(body, result("x = f(\n            1)")) == []  # the whole fill alone: nothing to choose
    # Where the code after the hole is the block's body (deeper than the cut's line), the cut is its header.
    header = Hole(prefix="def f(items):\n    ", suffix="\n        yield item\n")
    assert not leaves_open(header, "for item in items:\n        print(item)", "for item in items:")
    # Measured from the line as it stands in the file: the prefix's part of it counts.
    inline = Hole(prefix="def f(items):\n    for item in ", suffix="\n    return 1\n")
    assert leaves_open(inline, "items:\n        pass", "items:")
    assert not leaves_open(inline, "items:\n        pass\n    x = 1", "items:\n        pass")


def test_choose_end_is_a_boolean_at_the_boundary():
    with pytest.raises(ProtocolError, match="choose_end"):
        Hole(prefix="x", choose_end="yes").validate()


@pytest.fixture
def scorer(monkeypatch):
    """score_fills replaced by a table: text -> score (a missing text raises, as a failing pass)."""
    table, calls = {}, []

    def fake(engine, prefix, suffix, fills, room):
        calls.append(list(fills))
        return [table[f] for f in fills]

    monkeypatch.setattr(fill_end, "score_fills", fake)
    return table, calls


def test_the_best_read_cut_is_kept_and_the_reading_counts_as_a_pass(scorer):
    table, calls = scorer
    text = "    return sum(values) / len(values)\n\n# Example usage:\nprint(mean([1]))"
    cuts = line_cuts(text)
    table.update({c: -10.0 - i for i, c in enumerate(cuts)})
    table[cuts[0]] = -3.0
    out = choose_end(None, HOLE, result(text))
    assert calls == [cuts]
    assert out.text == cuts[0] and out.finish_reason == "end" and out.passes == 11


def test_a_fill_kept_whole_keeps_its_finish_reason_and_a_tie_keeps_the_shorter(scorer):
    table, _ = scorer
    text = "a = 1\nb = 2"
    table.update({"a = 1\n": -5.0, text: -1.0})
    assert choose_end(None, HOLE, result(text)).finish_reason == "max_tokens"
    table.update({"a = 1\n": -1.0})
    assert choose_end(None, HOLE, result(text)).text == "a = 1\n"


def test_a_failed_reading_or_a_fill_cut_short_keeps_the_fill_as_it_is(scorer):
    table, calls = scorer  # an empty table: every reading raises
    r = result("a = 1\nb = 2")
    assert choose_end(None, HOLE, r) == r
    assert choose_end(None, HOLE, result("a\nb", "unsure")) == result("a\nb", "unsure")
    assert len(calls) == 1


def test_best_of_n_reads_every_copys_cuts_once_each_with_the_copy_it_came_from():
    copies = [result("a\nb\nc"), result("a\nb\nd", "end"), result("z", "end"), result("a\nq", "unsure")]
    assert end_candidates(HOLE, copies) == [("a\n", 0), ("a\nb\n", 0), ("a\nb\nc", 0), ("a\nb\nd", 1), ("z", 2),
                                            ("a\nq", 3)]
    off = Hole(prefix=HOLE.prefix, suffix=HOLE.suffix, choose_end=False)
    assert end_candidates(off, copies) == [("a\nb\nc", 0), ("a\nb\nd", 1), ("z", 2), ("a\nq", 3)]
