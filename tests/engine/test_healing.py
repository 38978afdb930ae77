"""Whitespace healing: trailing blanks of a prefix go into the hole, and come back off the fill."""

import pytest

from dllm_engine.healing import heal, unheal
from dllm_engine.protocol import Hole, InfillRequest


@pytest.mark.parametrize("prefix, model_prefix, typed", [
    ("def f(x):\n    ", "def f(x):\n", "    "),  # the indentation of a fresh line
    ("    return ", "    return", " "),  # the space after a keyword
    ("x = 1\t \t", "x = 1", "\t \t"),
    ("def f(x):\n", "def f(x):\n", ""),  # a line start: nothing to heal
    ("    return x", "    return x", ""),
    ("", "", ""),
])
def test_heal_moves_trailing_blanks_into_the_hole(prefix, model_prefix, typed):
    assert heal(prefix) == (model_prefix, typed)
    assert model_prefix + typed == prefix  # nothing is lost


@pytest.mark.parametrize("text, typed, shown", [
    ("    return x", "    ", "return x"),  # the model wrote the typed indentation
    ("        return x", "    ", "return x"),  # deeper: the user's indentation wins
    ("\treturn x", "    ", "return x"),
    (" x + 1", " ", "x + 1"),
    ("x + 1", " ", "x + 1"),  # the model started with text: kept whole
    ("\n    y = 2", "    ", "\n    y = 2"),  # a line break first: kept (the server shapes it)
    ("  a", "", "  a"),  # nothing was typed: the fill is untouched
])
def test_unheal_takes_the_typed_blanks_back_off(text, typed, shown):
    assert unheal(text, typed) == shown


@pytest.mark.parametrize("text, typed, shown", [
    ("        return x", "  ", "      return x"),  # a span cut inside the indentation: it goes on
    ("    return x", "    ", "return x"),  # the typed indentation is the line's: nothing more
    ("  return x", "    ", "return x"),  # shallower: the user's indentation wins
    ("\t\treturn x", "\t", "\treturn x"),
    ("\treturn x", "  ", "return x"),  # another kind of blank: not a continuation
    ("\n    y = 2", "    ", "\n    y = 2"),
])
def test_unheal_keeps_indentation_that_goes_deeper_from_a_line_start(text, typed, shown):
    """`indenting`: the typed blanks are the whole of their line so far."""
    assert unheal(text, typed, indenting=True) == shown


@pytest.fixture(scope="module")
def engine(default_engine):
    return default_engine


def test_engine_heals_with_the_default_model(engine):
    """The indented empty line encodes like the line start before it, and the fill
    that comes back never repeats the indentation the user typed."""
    base = "def area(width, height):\n"
    healed = engine.infill(InfillRequest(holes=[Hole(prefix=base + "    ", suffix="\n", max_tokens=12)]))
    plain = engine.infill(InfillRequest(holes=[Hole(prefix=base, suffix="\n", max_tokens=12)]))
    assert healed.context_tokens == plain.context_tokens
    text = healed.holes[0].text
    assert not text.startswith((" ", "\t")), text


def test_token_healer_backs_up_a_partial_word(engine):
    tok = engine.tokenizer
    ids = tok.encode("for i in ran")
    kept, word, allowed = engine.healer.back_up(ids, tok.decode)
    assert kept == ids[:-1] and word == tok.decode(ids[-1:]) and word.endswith("ran")
    texts = [t for t, ok in zip(engine.healer.texts, allowed.tolist()) if ok]
    assert word in texts and all(t.startswith(word) for t in texts)
    assert any(t.startswith(word) and len(t) > len(word) for t in texts)  # e.g. " range"
    for probe in (word, " s", "get", "_", "x"):  # the bisected range is exactly the brute-force set
        allowed = engine.healer.allowed(probe)
        brute = {i for i, t in enumerate(engine.healer.texts) if t.startswith(probe)}
        assert set(allowed.nonzero().flatten().tolist()) == brute, probe
    for no_word in ("x = (", "def f():\n", "a +"):  # nothing to heal after punctuation or a newline
        ids = tok.encode(no_word)
        assert engine.healer.back_up(ids, tok.decode) == (ids, "", None)


@pytest.mark.parametrize("compact", [True, False], ids=["masked-rows-logits", "full-logits"])
def test_healed_first_token_extends_the_typed_word_even_against_the_model(engine, monkeypatch, compact):
    """Scripted logits put a token that does not extend the word first at slot 0;
    the engine must still commit one that does, and hand back only the new text
    (with the runner's compact masked-rows logits and with full [B, L, V] logits)."""
    tok = engine.tokenizer
    word = tok.decode(tok.encode("for i in ran")[-1:])
    extension = next(t for t in engine.healer.texts if t.startswith(word) and len(t) > len(word))
    wrong, right = tok.encode(" foo")[0], tok.encode(extension)[0]
    assert tok.decode([right]) == extension and not tok.decode([wrong]).startswith(word)
    real = engine.runner.canvas_logits

    def scripted(contexts, canvases, lengths, rows=None, compact=False):
        logits = real(contexts, canvases, lengths, rows).clone()
        logits[:] = 0.0
        logits[:, :, engine.special.end[0]] = 5.0  # every other slot: end the fill
        logits[:, 0, wrong] = 30.0
        logits[:, 0, right] = 20.0
        return logits[rows] if compact else logits

    monkeypatch.setattr(engine.runner, "canvas_logits", scripted)
    monkeypatch.setattr(engine.runner, "compact_logits", compact)
    result = engine.infill(InfillRequest(holes=[Hole(prefix="for i in ran", suffix=":\n", max_tokens=8)]))
    assert result.holes[0].text == extension[len(word):], result.holes[0]
