"""Healing at a line's start with the default model, whose vocabulary merges a line break with
the indentation after it (SmolLM2's `"\\n       "`): the typed blanks bound the first token, and a
fill that starts inside the indentation brings its line to the depth it needs (healing.py)."""

from dllm_engine.protocol import Hole, InfillRequest


def test_a_line_start_inside_the_indentation_is_filled_from_where_it_stops(base_engine):
    """A hole that starts two blanks into a loop body's line (a span or selection cut there):
    the fill brings the line to the body's depth, so the text parses as the loop's body.
    Before, the model's own indentation was dropped for the two typed blanks."""
    prefix = "def total(xs):\n    s = 0\n    for x in xs:\n  "
    suffix = "\n    return s\n"
    hole = base_engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=16, stop=("\n",))])).holes[0]
    assert hole.text.startswith("      ") and hole.text.strip(), repr(hole.text)
    compile(prefix + hole.text + suffix, "<fill>", "exec")


def test_a_healed_line_break_holds_the_typed_indentation(base_engine):
    """After typed blanks the first token must hold them but the one blank a word token brings
    (`"\\n       " + " return"` is eight): a user who dedented is not written the block's next line."""
    tok = base_engine.tokenizer
    ids = tok.encode("for line in f:\n")
    kept, healed, allowed = base_engine.healer.back_up(ids, tok.decode, words=False, indent=" " * 8)
    assert healed == "\n" and kept == ids[:-1]
    texts = [t for t, ok in zip(base_engine.healer.texts, allowed.tolist()) if ok]
    assert "\n       " in texts and "\n           " in texts
    assert all(t.startswith("\n       ") for t in texts)
    _, _, plain = base_engine.healer.back_up(ids, tok.decode, words=False)
    assert plain.sum() > allowed.sum() and plain[tok.encode("\n   ")[0]]
    _, _, one = base_engine.healer.back_up(ids, tok.decode, words=False, indent=" ")
    assert bool((one == plain).all())  # one blank: the word's own, nothing to hold
    _, _, deep = base_engine.healer.back_up(ids, tok.decode, words=False, indent=" " * 200)
    assert deep is not None and deep.any()  # deeper than any token: its longest run of blanks
