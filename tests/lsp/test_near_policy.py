"""Which fills the server lets the engine read from the near part of a new place's context
(Hole.near_tokens, engine/dllm_engine/near_context.py): typed ones, where the user waits on the
answer; not one the user asked for (best of N reads it against the whole context anyway), and
none when `context.nearTokens` is 0."""

from __future__ import annotations

from dllm_lsp.server.infill import request_for
from dllm_lsp.server.options import parse_options

from .plans import plan

EMPTY_BODY = "def total(xs):\n    █\n\n\ndef g():\n    pass\n"
MID_LINE = "def total(xs):\n    s = sum(█\n    return s\n"



def test_typed_fills_read_the_near_part_and_asked_ones_the_whole():
    for text in (EMPTY_BODY, MID_LINE):
        typed, options = plan(text, invoked=False)
        asked, _ = plan(text, invoked=True)
        assert typed.hole.near_tokens == options.context.near_tokens == 384
        assert asked.hole.near_tokens is None
        request = request_for([typed.hole], options)
        request.validate()  # what the engine gets: the field passes its boundary


def test_near_tokens_zero_reads_every_context_whole():
    typed, options = plan(MID_LINE, invoked=False, settings={"context": {"nearTokens": 0}})
    assert options.context.near_tokens == 0 and typed.hole.near_tokens is None


def test_a_bad_near_tokens_setting_keeps_the_default_and_says_why():
    options, errors = parse_options({"context": {"nearTokens": 10}})
    assert options.context.near_tokens == 384
    assert len(errors) == 1 and "context.nearTokens" in errors[0] and "64" in errors[0]
