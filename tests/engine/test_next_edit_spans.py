"""Which spans a next-edit request re-masks: the pure selection functions (next_edit/spans.py)."""

from dllm_engine.next_edit.request import RecentEdit
from dllm_engine.next_edit.spans import (
    Span,
    edit_seeds,
    merge,
    region_bounds,
    replaced_words,
    score_seeds,
    whole_region,
    widen_to_words,
)

DOC = "def area(width, height):\n    return w * height + w\n\n\ndef main():\n    print(area(2, 3))\n"


def test_a_rename_typed_in_pieces_is_one_replaced_word():
    # `w` became `width` by typing `idth` after it: the word touched was `w` before.
    at = DOC.index("idth")
    assert replaced_words(DOC, RecentEdit(offset=at, removed="", inserted="idth")) == {"w"}
    assert replaced_words(DOC, RecentEdit(offset=DOC.index("width"), removed="w", inserted="width")) == {"w"}
    # Typing a new word removes nothing.
    assert replaced_words(DOC, RecentEdit(offset=at, removed="", inserted="")) == set()


def test_stale_uses_are_seeded_and_the_edit_itself_is_not():
    lo, hi = region_bounds(DOC, 0, 6)
    seeds = edit_seeds(DOC, [RecentEdit(offset=DOC.index("width"), removed="w", inserted="width")], lo, hi)
    assert [DOC[s.start:s.end] for s in seeds] == ["w", "w"]
    assert all(s.start > DOC.index("return") for s in seeds)  # not the `w` inside `width`
    # Outside the region nothing is seeded.
    lo, hi = region_bounds(DOC, 0, 1)
    assert edit_seeds(DOC, [RecentEdit(offset=DOC.index("width"), removed="w", inserted="width")], lo, hi) == []


def test_an_added_parameter_seeds_the_other_argument_lists():
    doc = "def area(w, h, unit):\n    return w * h\n\nprint(area(2, 3))\nx = area(4, 5)\n"
    at = doc.index(", unit")
    seeds = edit_seeds(doc, [RecentEdit(offset=at, removed="", inserted=", unit")], 0, len(doc))
    assert [doc[s.start:s.end] for s in seeds] == ["2, 3", "4, 5"]


def test_older_edits_add_their_removed_names():
    doc = "a = total\nb = count\nc = count + total\n"
    edits = [RecentEdit(offset=0, removed="count", inserted="a"), RecentEdit(offset=4, removed="sum", inserted="total")]
    seeds = edit_seeds(doc, edits, 0, len(doc))
    assert sorted(doc[s.start:s.end] for s in seeds) == ["count", "count"]


def test_spans_are_widened_to_whole_words():
    text = "return total_count + 1"
    s = text.index("al_co")
    assert text[slice(*widen_to_words(text, s, s + 3))] == "total_count"
    assert widen_to_words(text, 0, len(text)) == (0, len(text))


def test_score_seeds_need_a_clear_preference_and_skip_blanks_and_the_edit():
    doc = "x = foo(bar)\n    \n"
    scored = [(4, 7, 0.001, 0.9), (8, 11, 0.001, 0.05), (12, 17, 0.0001, 0.9), (0, 1, 0.001, 0.9)]
    picked = score_seeds(doc, scored, threshold=0.02, limit=4, avoid=(0, 1))
    assert [doc[s.start:s.end] for s in picked] == ["foo"]
    assert score_seeds(doc, scored, threshold=0.0005, limit=4, avoid=(0, 1)) == []


def test_whole_region_keeps_the_edited_lines():
    lo, hi = region_bounds(DOC, 0, 6)
    at = DOC.index("return")
    spans = whole_region(DOC, lo, hi, (at, at + 6))
    texts = [DOC[s.start:s.end] for s in spans]
    assert texts == ["def area(width, height):\n", "\n\ndef main():\n    print(area(2, 3))\n"]


def test_merge_joins_overlaps_and_keeps_the_nearest():
    spans = [Span(0, 5, "edit"), Span(3, 8, "score"), Span(20, 25, "edit"), Span(40, 45, "edit")]
    assert merge(spans, cursor=22, limit=2) == [Span(0, 8, "edit"), Span(20, 25, "edit")]
    assert merge(spans, cursor=50, limit=1) == [Span(40, 45, "edit")]


def test_mentions_the_caller_did_not_name_as_code_are_not_seeded():
    from dllm_engine.next_edit.spans import code_uses_only

    doc = 'def f(total):\n    """Sum count items."""\n    return count + 1\n'
    seeds = edit_seeds(doc, [RecentEdit(doc.index("total"), "count", "total")], 0, len(doc))
    assert len(seeds) == 2  # the docstring's mention and the use
    use = doc.index("count +")
    kept = code_uses_only(seeds, doc, {"count"}, [(use, use + 5)])
    assert [(s.start, s.end) for s in kept] == [(use, use + 5)]
    assert code_uses_only(seeds, doc, {"count"}, []) == seeds  # no parse from the caller: every mention


def test_a_place_named_twice_keeps_its_hint():
    hinted, caller = Span(10, 15, "edit", "total"), Span(10, 15, "caller")
    assert merge([hinted, caller], 0, 8) == [Span(10, 15, "edit", "total")]
    assert merge([Span(10, 15, "edit", "total"), Span(12, 20, "score")], 0, 8)[0].hint == ""


def test_a_seeded_fill_must_do_what_the_edit_did():
    from dllm_engine.next_edit.spans import follows_edit

    stale = Span(0, 1, "edit", "width", "rename")
    assert follows_edit(stale, "w", "width") and not follows_edit(stale, "w", "cur_len")
    assert not follows_edit(stale, "w", "w") and not follows_edit(stale, "w", "widths")
    call = Span(0, 4, "edit", "2, 3, unit", "argument")
    assert follows_edit(call, "2, 3", "2, 3, unit") and follows_edit(call, "2, 3", "2, 3, u")
    assert not follows_edit(call, "2, 3", "2, 4") and not follows_edit(call, "2, 3", "2, 3")
    assert not follows_edit(call, "2, 3", "2, 3 + unit")
    assert follows_edit(Span(0, 1, "score"), "w", "anything")  # not seeded by the edit: no expectation


def test_argument_list_seeds_carry_the_added_item_and_skip_calls_already_given_it():
    doc = "def area(w, h, unit):\n    return w * h\n\nprint(area(2, 3, unit))\nx = area(4, 5)\nz = area()\n"
    at = doc.index(", unit")
    seeds = edit_seeds(doc, [RecentEdit(offset=at, removed="", inserted=", unit")], 0, len(doc))
    assert [(doc[s.start:s.end], s.hint, s.kind) for s in seeds] == [("4, 5", "4, 5, unit", "argument"),
                                                                   ("", "unit", "argument")]
    renamed = edit_seeds(DOC, [RecentEdit(offset=DOC.index("width"), removed="w", inserted="width")], 0, len(DOC))
    assert {(s.hint, s.kind) for s in renamed} == {("width", "rename")}


def test_a_caller_that_parsed_the_code_names_every_use_it_wants():
    from dllm_engine.next_edit.spans import code_uses_only

    doc = 'def f(total):\n    return count\n\ndef g(count):\n    """f(count)"""\n    return count\n'
    seeds = edit_seeds(doc, [RecentEdit(doc.index("total"), "count", "total")], 0, len(doc))
    assert len(seeds) == 4
    use = doc.index("return count") + 7
    kept = code_uses_only(seeds, doc, {"count"}, [(use, use + 5)], complete=True)
    assert [(s.start, s.end) for s in kept] == [(use, use + 5)]  # not `g`'s own `count`
    assert code_uses_only(seeds, doc, {"count"}, [], complete=True) == []  # none left in scope: none
    call = Span(3, 5, "edit", "a, b", "argument")
    assert code_uses_only([call], doc, set(), [], complete=True) == []  # a docstring's example call
    assert code_uses_only([call], doc, set(), [(3, 5)], complete=True) == [call]
