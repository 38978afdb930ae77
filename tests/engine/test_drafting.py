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

