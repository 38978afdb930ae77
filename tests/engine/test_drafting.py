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
                           first_allowed=first_allowed, temperature=0)


def drafted_at(history, head=None, slot=1, first_allowed=None, tree=0):
    """The draft canvas_drafts makes for a greedy canvas whose current slot is `slot` (0: its
    first pass; 1: the history's last token committed in slot 0), `head` its draft head's
    guess (first slot, chains, their first tokens' probabilities), if any."""
    from dllm_engine.drafting import canvas_drafts

    stop_at = torch.zeros(128, dtype=torch.bool)
    window = torch.zeros(1, 8, dtype=torch.bool)
    window[0, slot] = True
    canvases = torch.full((1, 8), 99)
    context = history[:len(history) - slot]
    canvases[0, :slot] = t(*history[len(history) - slot:])
    a = hole_at(context, head, first_allowed=first_allowed)
    a.canvas = canvases[0].clone()
    out = canvas_drafts([a], canvases, window, 99, 3, stop_at, tree)
    if tree:
        out = out[0]
    return [] if out is None else out[0][out[0] >= 0].tolist()


FULL = [7, 8, 9, 4, 5, 6, 1, 7, 8, 9]  # the trailing 3-gram occurred before: 4 5 6 follow it
PAIR = [3, 8, 9, 4, 5, 6, 1, 7, 8, 9]  # only the trailing 2-gram 8 9 occurred before
SHORT = [3, 9, 4, 5, 6, 1, 9]  # only the trailing 1-gram 9 occurred before


def test_a_pass_drafts_a_match_of_two_or_more_then_the_heads_guess_then_a_short_match():
    from dllm_engine.drafting import long_match

    sure, unsure = (1, [[40, 41, 42]], [0.6]), (1, [[40, 41, 42]], [0.1])
    assert long_match(t(*FULL)) and long_match(t(*PAIR)) and not long_match(t(*SHORT))
    assert drafted_at(FULL, sure) == [4, 5, 6]  # a full-length match outranks the head
    assert drafted_at(PAIR, sure) == [4, 5, 6]  # and so does a 2-token one
    assert drafted_at(SHORT, sure) == [40, 41, 42]  # the head outranks a 1-token match
    assert drafted_at(SHORT, unsure) == [4, 5, 6]  # unless it is unsure of its first token
    assert drafted_at([1, 2, 3], unsure) == [40, 41, 42]  # with nothing else, an unsure guess still runs
    assert drafted_at(SHORT) == [4, 5, 6]  # with no guess, the short match
    assert drafted_at(SHORT, (2, [[40, 41, 42]], [0.9])) == [4, 5, 6]  # a guess for another slot is not used
    assert drafted_at([1, 2, 3]) == []


def test_a_canvas_first_slot_drafts_the_heads_sure_guess_before_a_match():
    """At slot 0 the head started from the base's reading of the whole context, a match only
    from its last tokens: a sure guess goes first, an unsure one after the match."""
    assert drafted_at(FULL, (0, [[40, 41, 42]], [0.6]), slot=0) == [40, 41, 42]
    assert drafted_at(FULL, (0, [[40, 41, 42]], [0.1]), slot=0) == [4, 5, 6]
    assert drafted_at(FULL, slot=0) == [4, 5, 6]
    # a draft tree checks both, the sure guess as its trunk
    assert drafted_at(FULL, (0, [[40, 41, 42]], [0.6]), slot=0, tree=6) == [40, 41, 42]
    assert drafted_at(FULL, (0, [[40, 41, 42]], [0.1]), slot=0, tree=6) == [4, 5, 6]


def test_a_healed_first_slot_drafts_only_a_chain_it_may_take():
    """At a healed slot 0 a chain whose first token the base may not take there (the engine
    restricts its choice to tokens extending the backed-up text) is never drafted: the next
    guess in line is, and with none the pass runs without a draft."""
    allowed = torch.zeros(128, dtype=torch.bool)
    guess = (0, [[40, 41, 42]], [0.6])
    allowed[[40, 4]] = True
    assert drafted_at(FULL, guess, slot=0, first_allowed=allowed) == [40, 41, 42]
    allowed[40] = False
    assert drafted_at(FULL, guess, slot=0, first_allowed=allowed) == [4, 5, 6]  # the guess may not stand there
    allowed[4] = False
    assert drafted_at(FULL, guess, slot=0, first_allowed=allowed) == []
    assert drafted_at(FULL, guess, slot=0) == [40, 41, 42]  # unhealed: no restriction
    allowed[:] = False  # only slot 0 is restricted
    assert drafted_at(FULL, (1, [[40, 41, 42]], [0.6]), slot=1, first_allowed=allowed) == [4, 5, 6]
