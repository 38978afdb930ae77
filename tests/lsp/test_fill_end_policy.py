"""Which fills the server lets the engine end where it reads the code after them best
(Hole.choose_end, engine/dllm_engine/fill_end.py): a fill the user asked for does; a typed one
ends by its block, line cap and unsure gate alone (measured slower for no more right lines)."""

from __future__ import annotations

from dllm_lsp.server.infill import request_for

from .plans import plan

EMPTY_BODY = "def total(xs):\n    █\n\n\ndef g():\n    pass\n"
MID_LINE = "def total(xs):\n    s = sum(█\n    return s\n"



def test_only_a_fill_the_user_asked_for_has_its_end_chosen():
    for text in (EMPTY_BODY, MID_LINE):
        typed, options = plan(text, invoked=False)
        asked, _ = plan(text, invoked=True)
        assert not typed.hole.choose_end and asked.hole.choose_end
        request = request_for([asked.hole], options, invoked=True)
        request.validate()  # what the engine gets: the flag passes its boundary
        assert request.holes[0].choose_end and request.params.candidates == options.diffusion.invoked_candidates


def test_the_refactor_command_does_not_choose_its_fills_ends():
    """`dllm-lsp refactor` batches many holes: reading each one's cuts doubled a batch's time."""
    from dllm_lsp.refactor.runner import _engine_hole

    asked, _ = plan(EMPTY_BODY, invoked=True)
    assert asked.hole.choose_end and _engine_hole(asked.ctx).choose_end is False
