"""Whitespace healing: trailing blanks of a prefix go into the hole, and come back off the fill."""

import pytest

from dllm_engine.engine import Engine, EngineConfig
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


@pytest.fixture(scope="module")
def engine():
    e = Engine(EngineConfig(threads=1))
    yield e
    e.shutdown()


def test_engine_heals_with_the_default_model(engine):
    """The indented empty line encodes like the line start before it, and the fill
    that comes back never repeats the indentation the user typed."""
    base = "def area(width, height):\n"
    healed = engine.infill(InfillRequest(holes=[Hole(prefix=base + "    ", suffix="\n", max_tokens=12)]))
    plain = engine.infill(InfillRequest(holes=[Hole(prefix=base, suffix="\n", max_tokens=12)]))
    assert healed.context_tokens == plain.context_tokens
    text = healed.holes[0].text
    assert not text.startswith((" ", "\t")), text
