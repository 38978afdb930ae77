"""Draft lookup and acceptance (drafting.py): the pure parts, no model."""

import torch

from dllm_engine.drafting import accepted_run, lookup_draft


def t(*ids):
    return torch.tensor(ids, dtype=torch.long)


def test_the_longest_trailing_ngram_wins_and_its_latest_occurrence():
    # trailing 3-gram (7, 8, 9) occurs once earlier, followed by 4 5; the 1-gram 9 also
    # occurs later (followed by 6), but the longer match is preferred
    history = t(7, 8, 9, 4, 5, 1, 9, 6, 2, 7, 8, 9)
    assert lookup_draft(history, 2).tolist() == [4, 5]
    # two occurrences of the trailing 2-gram: the latest one's continuation
    history = t(1, 2, 3, 0, 1, 2, 4, 0, 1, 2)
    assert lookup_draft(history, 3).tolist() == [4, 0, 1]


def test_no_match_no_draft_and_the_length_is_capped():
    assert lookup_draft(t(1, 2, 3, 4), 4).numel() == 0
    assert lookup_draft(t(5), 4).numel() == 0
    assert lookup_draft(t(1, 2, 3, 1), 0).numel() == 0
    assert lookup_draft(t(1, 2, 3, 4, 5, 1), 2).tolist() == [2, 3]
    assert lookup_draft(t(1, 2, 1), 8).tolist() == [2, 1]  # runs to the end of the history


def test_min_ngram_refuses_short_matches():
    assert lookup_draft(t(1, 2, 3, 1), 2, min_ngram=2).numel() == 0
    assert lookup_draft(t(1, 2, 3, 1, 2), 2, min_ngram=2).tolist() == [3, 1]


def test_a_draft_stops_before_a_marker_token():
    stop_at = torch.zeros(16, dtype=torch.bool)
    stop_at[9] = True  # e.g. the prefix marker between suffix and prefix
    history = t(1, 2, 3, 9, 4, 1, 2)
    assert lookup_draft(history, 4, stop_at=stop_at).tolist() == [3]
    assert lookup_draft(t(1, 9, 3, 1), 4, stop_at=stop_at).numel() == 0


def test_accepted_run_keeps_matches_and_the_first_differing_token():
    # model tokens: its choice at the current slot, then after each draft token
    assert accepted_run([5], []) == 1  # no draft: one token, as without drafting
    assert accepted_run([5, 6, 7], [4, 6]) == 1  # the first guess is wrong: the model's own token only
    assert accepted_run([5, 6, 7], [5, 0]) == 2  # one right guess: it and the model's next token
    assert accepted_run([5, 6, 7], [5, 6]) == 3  # the whole draft right: plus the token after it



def hole_at(context, head_draft=None, mask=99, first_allowed=None):
    """A greedy canvas of blocks of 1 at slot 0 after `context` (its last token held out, as
    the engine holds it), with the draft head's guess `head_draft` for slot 0, if any, and the
    tokens a healed slot 0 may take (`first_allowed`, bool [V]), if it is healed."""
    from types import SimpleNamespace

    ctx = SimpleNamespace(ids=t(*context[:-1]), last_id=context[-1], absorbed=0)
    return SimpleNamespace(context=ctx, canvas=torch.full((8,), mask), head_draft=head_draft,
                           first_allowed=first_allowed)


def test_a_pass_drafts_a_long_match_then_the_heads_guess_then_a_short_match():
    from dllm_engine.drafting import canvas_drafts, long_match

    stop_at = torch.zeros(128, dtype=torch.bool)
    window = torch.zeros(1, 8, dtype=torch.bool)
    window[0, 0] = True
    canvases = torch.full((1, 8), 99)

    def drafted(context, head=None):
        out = canvas_drafts([hole_at(context, head)], canvases, window, 99, 3, stop_at)
        return [] if out is None else out[0][out[0] >= 0].tolist()

    full = [7, 8, 9, 4, 5, 6, 1, 7, 8, 9]  # the trailing 3-gram occurred before: 4 5 6 follow it
    short = [3, 9, 4, 5, 6, 1, 9]  # only the trailing 1-gram 9 occurred before
    guess = (0, [[40, 41, 42]])
    assert long_match(torch.tensor(full)) and not long_match(torch.tensor(short))
    assert drafted(full, guess) == [4, 5, 6]  # a full-length match outranks the head
    assert drafted(short, guess) == [40, 41, 42]  # the head outranks a short match
    assert drafted(short) == [4, 5, 6]  # with no guess, the short match
    assert drafted(short, (1, [[40, 41, 42]])) == [4, 5, 6]  # a guess for another slot is not used
    assert drafted([1, 2, 3]) == []


def test_a_healed_first_slot_drafts_only_a_chain_it_may_take():
    """At a healed slot 0 a chain whose first token the base may not take there (the engine
    restricts its choice to tokens extending the backed-up text) is never drafted: the next
    guess in line is, and with none the pass runs without a draft."""
    from dllm_engine.drafting import canvas_drafts

    stop_at = torch.zeros(128, dtype=torch.bool)
    window = torch.zeros(1, 8, dtype=torch.bool)
    window[0, 0] = True
    canvases = torch.full((1, 8), 99)
    full = [7, 8, 9, 4, 5, 6, 1, 7, 8, 9]  # a full-length match: 4 5 6 follow
    allowed = torch.zeros(128, dtype=torch.bool)

    def drafted(head=None):
        out = canvas_drafts([hole_at(full, head, first_allowed=allowed)], canvases, window, 99, 3, stop_at)
        return [] if out is None else out[0][out[0] >= 0].tolist()

    allowed[[40, 4]] = True
    assert drafted((0, [[40, 41, 42]])) == [4, 5, 6]  # allowed: the match outranks the head as before
    allowed[4] = False
    assert drafted((0, [[40, 41, 42]])) == [40, 41, 42]  # the match's first token may not stand there
    allowed[40] = False
    assert drafted((0, [[40, 41, 42]])) == []
    allowed[:] = True
    unhealed = canvas_drafts([hole_at(full, (0, [[40, 41, 42]]))], canvases, window, 99, 3, stop_at)
    assert unhealed[0][unhealed[0] >= 0].tolist() == [4, 5, 6]
