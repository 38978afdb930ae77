"""What a streamed fill may send: only text no later token can change (pure functions)."""

from __future__ import annotations

import pytest

from dllm_engine.openai_api.streaming import FillStream, sendable


@pytest.mark.parametrize("text,stop,expected", [
    ("abc", (), "abc"),
    ("ab\ufffd", (), "ab"),  # half a UTF-8 character: held until the next token completes it
    ("ab\ufffd\ufffd", (), "ab"),
    ("x = 1\ny", ("\n",), "x = 1"),  # a stop found whole: cut there, final
    ("x = 1", ("\n\n",), "x = 1"),  # no tail of it begins a stop
    ("x = 1\n", ("\n\n",), "x = 1"),  # "\n" may become "\n\n"
    ("x = 1\n", ("\n\n", "\n"), "x = 1"),
    ("return x", ("\n\n", "return"), "", ),  # stop at 0
    ("abc", ("cd",), "ab"),  # "c" may be the start of "cd"
    ("ab\ufffd", ("zz",), "ab"),
    ("abz", ("zz",), "ab"),
])
def test_sendable(text, stop, expected):
    assert sendable(text, stop) == expected


def test_a_stop_spanning_chunks_is_never_sent():
    s = FillStream(("END",))
    sent = [s.settled("x = 1 E"), s.settled("x = 1 EN"), s.settled("x = 1 END and more")]
    assert "".join(sent) == "x = 1 " and s.final("x = 1 ") == ""


def test_chunks_join_to_the_final_text():
    s = FillStream(())
    parts = [s.settled(t) for t in ("", "de", "def\ufffd", "def é", "def é(")]
    parts.append(s.final("def é(x):"))
    assert "".join(parts) == "def é(x):" and all(p != "\ufffd" for p in parts)


def test_the_suffixs_head_is_held_back_and_cuts_the_stream_where_the_engine_cuts_the_fill():
    from dllm_engine.protocol import Hole

    s = FillStream.for_hole(Hole(prefix="def f(xs):\n    n = 0\n", suffix="    return n\n"))
    sent = [s.settled(t) for t in ("    n += 1\n", "    n += 1\n    ret", "    n += 1\n    return n\n    x")]
    assert "".join(sent) == "    n += 1\n" and s.final("    n += 1\n") == ""
    # deeper indentation is no echo of an indented head: sent on
    s = FillStream.for_hole(Hole(prefix="if a:\n", suffix="    return n\n"))
    assert s.settled("        return n\n    re") == "        return n\n"  # "    re" may begin the head
    # the rule off: the head is text like any other
    s = FillStream.for_hole(Hole(prefix="x\n", suffix="    return n\n", stop_at_suffix=False))
    assert s.settled("    return n\n") == "    return n\n"


def test_blanks_after_a_line_break_wait_for_text_before_an_indented_suffix():
    """The engine drops a fill's trailing blanks before a suffix with its own indentation
    (trailing_indent.py): a stream holds them back until text follows, so what it sent is
    always a prefix of the final fill."""
    from dllm_engine.protocol import Hole

    s = FillStream.for_hole(Hole(prefix="for x in xs:\n", suffix="    return n\n", stop_at_suffix=False,
                                     choose_end=False))
    assert s.settled("    n += x\n   ") == "    n += x\n"
    assert s.final("    n += x\n") == ""  # the blanks never went out
    s = FillStream.for_hole(Hole(prefix="for x in xs:\n", suffix="    return n\n", stop_at_suffix=False,
                                     choose_end=False))
    sent = [s.settled("    n += x\n   "), s.settled("    n += x\n        if n:")]
    assert "".join(sent) == "    n += x\n        if n:"  # followed by text, they are the next line's
    s = FillStream.for_hole(Hole(prefix="f(\n", suffix="b)\n"))  # a suffix that starts with text
    assert s.settled("    a,\n    ") == "    a,\n    "


def test_a_fill_whose_end_is_chosen_streams_its_first_line_then_the_chosen_rest():
    """The engine may cut such a fill at any line break once it is finished (fill_end.py): every
    cut holds the first line, with its break where the suffix starts on the next line, without
    it where the suffix brings its own; the rest goes out with the chosen end."""
    from dllm_engine.protocol import Hole

    s = FillStream.for_hole(Hole(prefix="def f(xs):\n    xs = list(xs)\n", suffix="    return n\n"))
    assert s.settled("    n = 0") == "    n = 0"
    assert s.settled("    n = 0\n    for x in xs:\n") == "\n"
    assert s.final("    n = 0\n    for x in xs:\n        n += x\n") == "    for x in xs:\n        n += x\n"
    s = FillStream.for_hole(Hole(prefix="def f(xs):\n    ", suffix="\n    return n\n"))
    assert s.settled("n = 0\n    m = 1") == "n = 0"
    assert s.final("n = 0") == ""
    s = FillStream.for_hole(Hole(prefix="x = f(", suffix="y)\n"))  # ends inside a line: no cut, no hold
    assert s.settled("a,\n    b") == "a,\n    b"
