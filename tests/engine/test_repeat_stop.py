"""Hole.stop_repeats (repeat_stop.py): the rule, its agreement with the language server's own cut
(shaping's drop_repetition), its validation at the boundary, and a real model's looping fills
ended where the loop starts, in fewer passes."""

import pytest

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.http_schemas import InfillBody
from dllm_engine.protocol import Hole, InfillRequest, ProtocolError
from dllm_engine.repeat_stop import loop_seen, repeat_cut, typed_indent
from dllm_lsp.syntax.shaping_steps import CursorLine, drop_repetition

TEXTS = [
    'print(f"{test.name} - {test.name} - {test.name} - {test.name}")',
    "a = 1\nb = 2\nb = 2\nb = 2\nc = 3",
    "x\nfoo(bar)\nbaz(1)\nfoo(bar)\nbaz(1)\nq",
    "return 1, 1, 1, 1, 1",  # the phrase ' 1, ' has only two characters that are not blanks
    "----------------",  # one character repeated: a rule, not a loop
    ")\n)\n)\n)",  # trivial lines
    "ok = 1\nnext = 2",
    "    self.a = a\n    self.a = a\n    self.a = a\n",
    "first\nab_ab_ab_ab_ab_\nlast",
    "if x:\n    y\n    y\n    y\n",
    "'8859_8859_8859_8859_1_1_1_1_1.0.0.0.0.0,",
    # three levels deep: the indentation (three copies of 4 blanks) is a run that does not count
    "self.c.config(\n            cx=self.xview(self.xview(self.xview(self.xview(",
    "                ======== total = a + b\n",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("typed", ["", "    "])
def test_the_cut_is_the_language_servers_cut(text, typed):
    cut = repeat_cut(text, typed, final=True)
    ours = text[:cut] if cut >= 0 else text
    theirs = drop_repetition(text, CursorLine(typed, "", "", typed))
    assert ours == theirs


def test_a_phrase_loop_is_found_past_a_run_that_does_not_count():
    deep = "self.c.config(\n            cx=self.xview(self.xview(self.xview(self.xview("
    assert repeat_cut(deep) == len("self.c.config(\n            cx=self.xview(")
    assert repeat_cut("            ----------------\n", final=True) == -1  # blanks and a rule: no loop
    assert repeat_cut("------------ f(abc_abc_abc_", final=True) == len("------------ f(abc_")


def test_while_running_only_complete_lines_count_as_repeats():
    assert repeat_cut("b = 2\nb = 2\nb = 2") == -1  # the third may still grow: "b = 2 + x"
    assert repeat_cut("b = 2\nb = 2\nb = 2", final=True) == len("b = 2")
    assert repeat_cut("b = 2\nb = 2\nb = 2\n") == len("b = 2")
    assert repeat_cut("x = f(abc_abc_abc_") == len("x = f(abc_")  # a phrase looping in a line counts at once
    # the first line is compared as it stands in the document: after the typed indentation
    assert repeat_cut("go()\n    go()\n    go()\n", typed_indent("def f():\n    ")) == len("go()")
    assert repeat_cut("go()\n    go()\n    go()\n", typed_indent("x = 1; ")) == -1
    assert typed_indent("a\n  ") == "  " and typed_indent("a\n  b") == "" and typed_indent("") == ""


@pytest.mark.parametrize("step", [1, 3, 17])
@pytest.mark.parametrize("typed", ["", "    "])
def test_the_per_pass_check_sees_what_the_whole_check_sees(step, typed):
    """loop_seen, fed a growing fill a few characters a pass (and once a head that changed),
    says "loop" exactly when repeat_cut on the whole text so far finds one."""
    for text in TEXTS + ["\n".join(TEXTS)]:
        clean = ""
        for end in range(0, len(text) + step, step):
            head = text[:end]
            looped, clean = loop_seen(head, typed, clean)
            assert looped == (repeat_cut(head, typed) >= 0), (text, end)
            if looped:
                break
    assert loop_seen("b = 3\nb = 2\nb = 2\nb = 2\n", "", "b = 1\n") == (True, "")  # a changed head is checked again


def test_bad_stop_repeats_is_refused_at_the_boundary():
    for bad in (1, 0, "yes", None):
        with pytest.raises(ProtocolError, match="stop_repeats"):
            Hole(prefix="x", stop_repeats=bad).validate()
    body = InfillBody.model_validate({"holes": [{"prefix": "x", "stop_repeats": True}]})
    assert body.holes[0].build().stop_repeats is True
    with pytest.raises(Exception):
        InfillBody.model_validate({"holes": [{"prefix": "x", "stop_repeats": 1}]})  # strict: a bool
    req = InfillRequest(holes=[Hole(prefix="x", stop_repeats=True)])
    assert InfillRequest.from_dict(req.to_dict()).holes[0].stop_repeats is True  # the daemon's wire form


# Prefixes the small model fills with a loop (greedy, 64 tokens).
LOOPING = ["SIZES = {\n    'small': 1,\n    'medium': 2,\n", "def main():\n    print("]


def test_a_real_models_loop_ends_where_it_starts():
    engine = Engine(EngineConfig(model="small", threads=1))
    looped = shorter = 0
    try:
        for prefix in LOOPING:
            def fill(stop):
                return engine.infill(InfillRequest(holes=[
                    Hole(prefix=prefix, suffix="\n", max_tokens=64, stop_repeats=stop)])).holes[0]

            plain, stopped = fill(False), fill(True)
            cut = repeat_cut(plain.text, final=True)
            if cut < 0:
                assert stopped.text == plain.text  # no loop: the same fill
                continue
            looped += 1
            assert stopped.text == plain.text[:cut] and stopped.finish_reason == "end"
            assert stopped.passes <= plain.passes, (stopped.passes, plain.passes)
            shorter += stopped.passes < plain.passes  # a loop seen only at the last pass saves none
    finally:
        engine.shutdown()
    assert looped >= 1 and shorter >= 1, "no prefix looped early: choose others"
