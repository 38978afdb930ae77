"""Branches for best of N (branches.py, candidates.py): names the code after the hole uses start
some copies' fills, and the scorer judges them like any candidate."""

import dataclasses

from dllm_engine.branches import branch_prefix, branch_words
from dllm_engine.candidates import branch_text, expand, sampling_for
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest

COUNT = "def count(path):\n    total = 0\n    for line in read(path):\n        "
AFTER = "\n    return total\n\n\nif __name__ == '__main__':\n    print(count('x'))\n"


def test_a_name_the_suffix_uses_and_the_prefix_has_starts_a_branch():
    assert branch_words(COUNT, AFTER, 2) == ["total"]  # `count` comes after a top-level line: outside the block
    assert branch_prefix(COUNT, "total") == COUNT + "total"


def test_no_branch_mid_line_or_without_a_shared_name():
    assert branch_words(COUNT + "x = ", AFTER, 2) == []  # the cursor continues a statement
    assert branch_words(COUNT, "\n    return 0\n", 2) == []  # the suffix names nothing the prefix has
    assert branch_words(COUNT, "\n    return self.total\n", 2) == ["total"]  # `self`, keywords: never
    assert branch_words(COUNT, "\n    # total is done\n    print('total')\n", 2) == []  # comments and strings
    assert branch_words(COUNT, AFTER, 0) == []


def test_a_whole_line_hole_gets_the_statement_indentation():
    """A hole that was a whole line (its prefix ends with the line break, the suffix starts at
    the next line), as HumanEval cuts them: the branch is indented as the statement would be."""
    opened = "def f(xs):\n    acc = 0\n    for x in xs:\n"
    assert branch_words(opened, "    return acc\n", 1) == ["acc"]
    assert branch_prefix(opened, "acc") == opened + "        acc"  # one level into the loop
    same = "def f(xs):\n    acc = 0\n"
    assert branch_prefix(same, "acc") == same + "    acc"
    tabs = "def f(xs):\n\tacc = 0\n\tfor x in xs:\n"
    assert branch_prefix(tabs, "acc") == tabs + "\t\tacc"


def test_expand_puts_branches_after_the_request_s_own_copy():
    hole = Hole(prefix=COUNT, suffix=AFTER, max_tokens=16)
    plain = Hole(prefix="x = ", suffix="\n", max_tokens=8)
    req = InfillRequest(holes=[hole, plain], params=DiffusionParams(candidates=3))
    out = expand(req, 3).holes
    assert [branch_text(hole, h) for h in out[:3]] == ["", "total", ""]
    assert out[3:] == [plain] * 3
    # the branch continues greedily; the copy left over samples
    assert [sampling_for(i, 3, 0.0, bool(branch_text(hole, out[i]))) for i in range(3)] == [0.0, 0.0, 0.8]
    # a sampling request gets samples only (its own draws are its candidates)
    warm = dataclasses.replace(req, params=DiffusionParams(candidates=3, temperature=0.5))
    assert expand(warm, 3).holes[:3] == [hole] * 3


def test_a_branch_s_fill_comes_back_with_its_name(tiny_shifted_model):
    """On a real (tiny) model: best of 2 with a branch answers a fill that starts with the name
    when the branch wins, and the plain fill otherwise; either is one of the copies' fills."""
    from dllm_engine.engine import Engine, EngineConfig

    hole = Hole(prefix=COUNT, suffix=AFTER, max_tokens=6)
    engine = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1, dtype="float32"))
    try:
        best = engine.infill(InfillRequest(holes=[hole], params=DiffusionParams(candidates=2))).holes[0]
        plain = engine.infill(InfillRequest(holes=[hole])).holes[0]
        branch = engine.infill(InfillRequest(holes=[dataclasses.replace(hole, prefix=COUNT + "total")])).holes[0]
    finally:
        engine.shutdown()
    assert best.text in (plain.text, "total" + branch.text)
