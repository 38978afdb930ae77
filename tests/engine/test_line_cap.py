"""Hole.max_lines (line_cap.py): the rule, its agreement with the language server's own cap
(shaping's cap_lines), its validation at the boundary, and a real model's multi-line fill
ended after its lines, in fewer passes."""

import pytest

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.http_schemas import InfillBody
from dllm_engine.line_cap import line_cap_cut
from dllm_engine.protocol import Hole, InfillRequest, ProtocolError
from dllm_lsp.syntax.shaping_steps import cap_lines

TEXTS = [
    "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n",
    "\n    a = 1\n\n    b = 2\n    c = 3\n",  # after an opener: the empty first line and blank lines do not count
    '"""Doc.\n\n    More (see f(x).\n    """\nx = f(1,\n      2)\ny = 3\nz = 4\nw = 5',
    "x = [\n    1,\n    2,\n    3,\n]\ny = 1\n",  # a list literal is shown whole
    "s = '''one\ntwo\nthree\nfour\nfive'''\nafter\n",
    'msg = "(" + name\nnext = 1\nmore = 2\nlast = 3\n',  # a bracket in a string: crude, never cut early
    "if a:\n    b()\nelse:\n    c()\nd()\n",
    "one line",
    "",
    '"""Doc\n    more words\n    and more',  # ends in its docstring: the server closes it
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("max_lines", [1, 2, 3, 4, 6])
def test_the_cut_is_the_language_servers_cap(text, max_lines):
    """The server shows what the engine kept, plus the quotes that close a docstring cut open."""
    cut = line_cap_cut(text, max_lines)
    ours = text[:cut] if cut >= 0 else text
    theirs = cap_lines(text, max_lines, "    ")
    if theirs != ours:
        head, closing = theirs.rsplit("\n", 1)
        assert head == ours.rstrip() and closing.strip() in ('"""', "'''"), (theirs, ours)
    # The engine stops the fill there: the server shows the same for the text it gets.
    assert cap_lines(ours, max_lines, "    ") == theirs


def test_the_rule():
    assert line_cap_cut("a = 1\nb = 2\nc = 3\n", 2) == len("a = 1\nb = 2")
    assert line_cap_cut("a = 1\nb = 2", 2) == -1  # the last line may still grow
    assert line_cap_cut("\n\n    a\n\n    b\n    c", 2) == len("\n\n    a\n\n    b")
    # a docstring is cut too, once it holds text (the server closes it); its brackets are prose
    doc = '"""Sum (the\n    values\n    given.\n    """\nreturn s\n'
    assert line_cap_cut(doc, 1) == len('"""Sum (the')
    assert line_cap_cut(doc, 4) == len(doc.split("\nreturn")[0])
    assert line_cap_cut('"""\n    \n    Text\n', 1) == len('"""\n    \n    Text')  # not before it holds text
    assert line_cap_cut('x = f(\n    """doc\n    more\n', 1) == -1  # a bracket still open
    # an open bracket runs on to the line that closes it
    assert line_cap_cut("x = f(\n    a,\n    b)\ny\n", 1) == len("x = f(\n    a,\n    b)")
    assert line_cap_cut("x = f(\n    a,\n", 1) == -1


def test_the_server_closes_a_docstring_it_cut():
    doc = '"""Parse the header.\n\n    Args:\n        line: the text.\n    """\n    return line\n'
    assert cap_lines(doc, 2, "    ") == '"""Parse the header.\n\n    Args:\n    """'
    assert cap_lines(doc, 5, "    ") == doc.rstrip("\n")  # under the cap: as written
    # opened on a later line: the quotes go at that line's own indentation
    later = 'x = 1\n        """Doc.\n        more\n        again\n'
    assert cap_lines(later, 2, "    ") == 'x = 1\n        """Doc.\n        """'
    # a fill that ran out of tokens inside its docstring (under the cap) is closed too
    assert cap_lines('"""Parse the\n    header', 4, "    ") == '"""Parse the\n    header\n    """'
    assert cap_lines('x = 1\ny = """', 4, "    ") == 'x = 1\ny = """'  # nothing in it yet: as written


def test_bad_max_lines_is_refused_at_the_boundary():
    for bad in (0, -1, 2000, 2.5, True, "4"):
        with pytest.raises(ProtocolError, match="max_lines"):
            Hole(prefix="x", max_lines=bad).validate()
    body = InfillBody.model_validate({"holes": [{"prefix": "x", "max_lines": 4}]})
    assert body.holes[0].build().max_lines == 4
    for bad in (0, 4.0, "4"):
        with pytest.raises(Exception):
            InfillBody.model_validate({"holes": [{"prefix": "x", "max_lines": bad}]})
    req = InfillRequest(holes=[Hole(prefix="x", max_lines=3)])
    assert InfillRequest.from_dict(req.to_dict()).holes[0].max_lines == 3  # the daemon's wire form


# Bodies the small model fills with several lines (greedy, 64 tokens).
BODIES = ["class Config:\n    def __init__(self, path, name, size):\n        ",
          "def main():\n    parser = argparse.ArgumentParser()\n    "]


def test_a_real_models_fill_ends_after_its_lines():
    engine = Engine(EngineConfig(model="small", threads=1))
    capped = 0
    try:
        for prefix in BODIES:
            def fill(max_lines):
                return engine.infill(InfillRequest(holes=[
                    Hole(prefix=prefix, suffix="\n", max_tokens=64, max_lines=max_lines)])).holes[0]

            plain, short = fill(None), fill(2)
            cut = line_cap_cut(plain.text, 2)
            if cut < 0:
                assert short.text == plain.text  # fewer lines than the cap: the same fill
                continue
            capped += 1
            assert short.text == plain.text[:cut] and short.finish_reason == "end"
            assert short.passes < plain.passes, (short.passes, plain.passes)
    finally:
        engine.shutdown()
    assert capped >= 1, "no body ran past two lines: choose others"
