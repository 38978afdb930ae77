"""Seeded fuzzing: context and shaping never raise, and a shaped completion never adds parse errors."""

from __future__ import annotations

import random

import pytest

from dllm_lsp.syntax.context import completion_context
from dllm_lsp.syntax.languages import parse
from dllm_lsp.syntax.parse_check import new_error_count
from dllm_lsp.syntax.shaping import shape_completion

from .samples import SAMPLES, load

JUNK = ["", "\n", ")))", "}\n}\n", "'", '"', "/*", "  \t", "é→😀", "\r\n", "\x00", "(((", "return", "\\"]


def _completion(rng: random.Random, text: str) -> str:
    """What a model might say: code from the same file (right or wrong place), junk, or both."""
    a = rng.randrange(len(text))
    piece = text[a : a + rng.choice([3, 10, 40, 120, 300])]
    return rng.choice([piece, rng.choice(JUNK), piece + rng.choice(JUNK), rng.choice(JUNK) + piece])


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_shaping_never_adds_parse_errors(path):
    text, spec = load(path)
    tree = parse(text, spec)
    rng = random.Random(f"fuzz-{path.name}")
    shaped_count = 0
    line_ends = [i for i, ch in enumerate(text) if ch == "\n"]
    for _ in range(120):
        # Mostly where people ask for completions (line ends), sometimes anywhere.
        offset = rng.choice(line_ends) if rng.random() < 0.7 else rng.randrange(len(text) + 1)
        ctx = completion_context(text, offset, spec, tree=tree)
        completion = _completion(rng, text)
        shaped = shape_completion(text, offset, completion, ctx, spec, tree=tree)
        if shaped is None:
            continue
        shaped_count += 1
        assert offset <= shaped.replace_end <= len(text)
        assert "\n" not in text[offset : shaped.replace_end]  # only closers on the cursor's line are replaced
        assert shaped.text.strip()
        if ctx.kind == "line":
            assert "\n" not in shaped.text
        filled = text[:offset] + shaped.text + text[shaped.replace_end :]
        span = (offset, offset + len(shaped.text))
        assert new_error_count(text, filled, spec, inserted=span) == 0, (offset, completion, shaped)
    assert shaped_count >= 3  # the check above ran on real results (80-120 per run over all languages)


@pytest.mark.parametrize("path", SAMPLES[:3], ids=[p.name for p in SAMPLES[:3]])
def test_unknown_language_fuzz_never_raises(path):
    text, _ = load(path)
    rng = random.Random(3)
    for _ in range(60):
        offset = rng.randrange(len(text) + 1)
        ctx = completion_context(text, offset, None)
        shaped = shape_completion(text, offset, _completion(rng, text), ctx, None)
        if shaped is not None:
            assert offset <= shaped.replace_end <= len(text)
