"""Apply edit's open spots decided by the default model, on cases whose answer is checkable.

An anchor: the snippet rewrites `result = ...` above a `return result` that the original holds twice:
the alignment alone would put it in the first function (`evens`, whose line is alike enough to
read as its edit). Written over each placement by the model, the snippet's line is what the
model itself writes in `doubled`, so the merge goes there, and there `result = []` is replaced.
A seam: `total = sum(xs) if xs else 0` after a marker, beside `total = sum(xs)` (ratio 0.745), is
the line changed, not a line added before the return.
"""

from __future__ import annotations

from dllm_engine.openai_api.apply_edit import apply_edit
from dllm_engine.openai_api.apply_edit_model import merge_with_model

EVENS = ("def evens(items):\n    result = [x for x in items if x % 2 == 0]\n    return result\n\n"
         "def doubled(items):\n    result = []\n    return result\n")
DOUBLE = "# ... existing code ...\n    result = [x * 2 for x in items]\n    return result\n# ... existing code ...\n"


def test_the_default_model_places_an_ambiguous_anchor_where_the_snippet_belongs(base_engine):
    text, decisions = merge_with_model(base_engine, EVENS, DOUBLE)
    assert text == EVENS.replace("    result = []", "    result = [x * 2 for x in items]")
    assert [(d["kind"], d["chosen"]) for d in decisions] == [("anchor", 1), ("seam", 1)]
    assert apply_edit(EVENS, DOUBLE) != text  # the alignment's own guess was the other function


def test_the_default_model_reads_a_half_alike_line_as_the_edit_it_is(base_engine):
    original = "def mean(xs):\n    total = sum(xs)\n    return total / len(xs)\n"
    snippet = "# ... existing code ...\n    total = sum(xs) if xs else 0\n    return total / len(xs)\n"
    text, decisions = merge_with_model(base_engine, original, snippet)
    assert text == original.replace("total = sum(xs)", "total = sum(xs) if xs else 0")
    assert [(d["kind"], d["chosen"]) for d in decisions] == [("seam", 1)]
