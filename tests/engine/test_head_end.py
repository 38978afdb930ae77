"""A single line's end on the draft head's word (EngineConfig.head_end_prob, head_end.py): the
head's probability that the next token begins with a stop string, and a fill the engine ends
there without a pass of its own. A tiny random shifted-logit model decoded in blocks of 1 (the
default model's decoding), with a head that says what the test wants; the default model's own
head: tests/bases/test_head_end_default.py."""

import pytest
import torch

from dllm_engine import draft_head
from dllm_engine.canvas_rules import stop_token_mask
from dllm_engine.checkpoint import load
from dllm_engine.denoise import SpecialIds
from dllm_engine.head_end import bracket_open, ends_here
from dllm_engine.protocol import Hole, InfillRequest

from test_draft_head import engine_for, head_dir, random_head  # noqa: F401 (head_dir: a fixture)

LINE = Hole(prefix="def add(a, b):\n    return ", suffix="\n", max_tokens=12, stop=("\n",))
FREE = Hole(prefix="x = 1\ny = ", suffix="\nprint(x + y)\n", max_tokens=10)


class Vocab:  # a tokenizer's decode and size, all stop_token_mask reads
    tokens = ["a", "\n", " \n", "\n    ", "x\ny", "\n\n", "b"]
    vocab_size = len(tokens)

    def decode(self, ids):
        return "".join(self.tokens[i] for i in ids)


def test_only_tokens_that_begin_with_a_stop_string_may_end_a_fill_unchanged():
    special = SpecialIds(mask=0, end=(6,), banned=())
    holding = stop_token_mask(("\n",), Vocab(), 7, special, torch.device("cpu"))
    leading = stop_token_mask(("\n",), Vocab(), 7, special, torch.device("cpu"), leading=True)
    assert holding.nonzero().squeeze(-1).tolist() == [1, 2, 3, 4, 5]
    assert leading.nonzero().squeeze(-1).tolist() == [1, 3, 5]  # " \n" and "x\ny" would add text


def test_the_threshold():
    assert ends_here(0.95, 0.9) and ends_here(0.9, 0.9) and not ends_here(0.89, 0.9)
    assert not ends_here(1.0, 0.0)  # 0: off


def test_a_fill_with_a_bracket_open_may_not_end():
    assert bracket_open("    return [max(arr[-k:])") and bracket_open("foo(a, {")
    assert not bracket_open("    return (a + b) / 2") and not bracket_open("a, b)")  # (the hole's own call)


def test_the_head_sums_its_probability_over_a_rows_end_tokens(tiny_shifted_model):
    loaded = load(str(tiny_shifted_model))
    vocab = loaded.config.vocab_size
    head = random_head(loaded.model, vocab=vocab // 2)  # guesses only the lower half's tokens
    hidden, tokens = torch.randn(3, loaded.config.hidden_size), torch.tensor([5, 6, 7])
    ends = torch.zeros(3, vocab, dtype=torch.bool)
    ends[0, [10, 11, 12]] = True
    ends[1, [20, vocab - 1]] = True  # one token the head cannot guess: it adds nothing
    plain = head.guess_chains(hidden, tokens, 3, 2)
    asked = head.guess_chains(hidden, tokens, 3, 2, ends=ends)
    assert plain.end_prob is None and plain.end_token is None
    assert torch.equal(asked.chains, plain.chains) and torch.equal(asked.first_prob, plain.first_prob)
    probs = head.logits(head.step(hidden.to(head.head.dtype), tokens)).float().softmax(-1)
    assert torch.allclose(asked.end_prob, torch.stack([probs[0, 10:13].sum(), probs[1, 20], torch.tensor(0.0)]))
    assert asked.end_token[:2].tolist() == [10 + int(probs[0, 10:13].argmax()), 20]


def _newline(engine) -> int:
    (token,) = engine.tokenizer.encode("\n")
    return token


def _oracle(monkeypatch, end_at: int, asked: list):
    """The head's chains as a random head guesses them; its end probability 1 from its
    `end_at`-th call with `ends` on (0 never), the end token the tokenizer's "\\n". `asked`
    gets each call's ends (None or a copy)."""
    guess = draft_head.DraftHead.guess_chains

    def oracle(self, hidden, tokens, steps, width, first_allowed=None, start_ban=None, ends=None):
        out = guess(self, hidden, tokens, steps, width, first_allowed, start_ban)
        asked.append(None if ends is None else ends.clone())
        calls = sum(e is not None for e in asked)
        if ends is None:
            return out
        sure = torch.tensor([float(end_at > 0 and calls >= end_at and bool(row.any())) for row in ends])
        return out._replace(end_prob=sure, end_token=torch.full((len(ends),), NEWLINE[0]))

    monkeypatch.setattr(draft_head.DraftHead, "guess_chains", oracle)


NEWLINE = [0]


@pytest.mark.parametrize("end_at", [1, 2])
def test_a_line_ends_where_the_head_is_sure_without_a_pass_of_its_own(tiny_shifted_model, head_dir, monkeypatch,
                                                                     end_at):
    off = engine_for(tiny_shifted_model, draft_head=str(head_dir), draft_tokens=3, head_end_prob=0)
    on = engine_for(tiny_shifted_model, draft_head=str(head_dir), draft_tokens=3)
    try:
        NEWLINE[0] = _newline(on)
        plain = off.infill(InfillRequest(holes=[LINE])).holes[0]
        assert plain.passes > end_at and "\n" not in plain.text  # (the random model writes no line break)
        asked = []
        _oracle(monkeypatch, end_at, asked)
        ended = on.infill(InfillRequest(holes=[LINE])).holes[0]
        ignored = off.infill(InfillRequest(holes=[LINE])).holes[0]
    finally:
        on.shutdown()
        off.shutdown()
    # ended after the passes before the head was sure, as they went without it (drafts are
    # checked), its last pass committing the end too; no pass for the end
    assert ended.passes == end_at and ended.finish_reason == "end"
    assert ended.committed_per_pass[:-1] == plain.committed_per_pass[:end_at - 1]
    assert ended.committed_per_pass[-1] == plain.committed_per_pass[end_at - 1] + 1
    assert ended.text and plain.text.startswith(ended.text) and len(ended.text) < len(plain.text)
    assert asked[0] is None  # the first pass's guess (from the context) is never an end
    # an engine with the setting off asks nothing and writes on as before
    assert ignored.text == plain.text and ignored.passes == plain.passes


def test_a_fill_with_a_bracket_open_is_left_to_the_base(tiny_shifted_model, head_dir, monkeypatch):
    import dllm_engine.engine as engine_module

    on = engine_for(tiny_shifted_model, draft_head=str(head_dir), draft_tokens=3)
    try:
        NEWLINE[0] = _newline(on)
        plain = on.infill(InfillRequest(holes=[LINE])).holes[0]  # (the random model writes no line break)
        _oracle(monkeypatch, 1, [])
        monkeypatch.setattr(engine_module, "bracket_open", lambda text: True)
        held = on.infill(InfillRequest(holes=[LINE])).holes[0]
    finally:
        on.shutdown()
    assert (held.text, held.passes) == (plain.text, plain.passes)


def test_only_a_greedy_fill_with_stop_strings_is_asked(tiny_shifted_model, head_dir, monkeypatch):
    on = engine_for(tiny_shifted_model, draft_head=str(head_dir), draft_tokens=3)
    try:
        NEWLINE[0] = _newline(on)
        asked = []
        _oracle(monkeypatch, 0, asked)
        line, free = on.infill(InfillRequest(holes=[LINE, FREE])).holes
        alone = on.infill(InfillRequest(holes=[FREE])).holes[0]
    finally:
        on.shutdown()
    rows = [e for e in asked if e is not None]
    assert rows and all(e.shape[0] in (1, 2) for e in rows)
    stop_ids = on._stop_ids(("\n",), leading=True).cpu()
    for e in rows:  # the line's row holds its stop tokens; the free fill's row (when in the call) none
        assert any(torch.equal(r, stop_ids) for r in e)
        assert all(torch.equal(r, stop_ids) or not r.any() for r in e)
    assert line.finish_reason in ("end", "max_tokens") and free.text == alone.text


def test_a_fill_this_pass_ended_already_is_not_asked():
    """A pass whose committed tokens hold a stop ended the fill (advance): the head is not asked
    to end it again; a healed slot 0 reads by its own table (its backed-up line break is no stop)."""
    from types import SimpleNamespace

    from dllm_engine.engine import Engine

    stop_ids = torch.zeros(8, dtype=torch.bool)
    stop_ids[[3, 4]] = True  # tokens holding "\n"
    first_stop_ids = torch.zeros(8, dtype=torch.bool)  # slot 0's: token 4 is the healed "\n" and more
    engine = SimpleNamespace(config=SimpleNamespace(head_end_prob=0.9), special=SpecialIds(mask=7, end=(6,), banned=()),
                             _stop_ids=lambda stop, leading: torch.tensor([leading] * 8))
    hole = SimpleNamespace(stop_ids=stop_ids, first_stop_ids=None,
                           state=SimpleNamespace(request=SimpleNamespace(holes=[Hole(prefix="x", stop=("\n",))])), index=0)
    canvas = torch.tensor([0, 1, 2, 1, 2])  # slots 0-1 committed before this pass, 2-4 by it
    asked = Engine._head_end_ids(engine, hole, canvas, 2)
    assert asked is not None and bool(asked.all())  # the leading table
    assert Engine._head_end_ids(engine, hole, torch.tensor([0, 1, 2, 3, 2]), 2) is None
    healed = SimpleNamespace(**{**hole.__dict__, "first_stop_ids": first_stop_ids})
    assert Engine._head_end_ids(engine, healed, torch.tensor([4, 2]), 0) is not None
    assert Engine._head_end_ids(engine, healed, torch.tensor([1, 4, 2]), 1) is None  # slot 1 reads the usual table
    assert Engine._head_end_ids(engine, SimpleNamespace(**{**hole.__dict__, "stop_ids": None}), canvas, 2) is None
    engine.config.head_end_prob = 0.0
    assert Engine._head_end_ids(engine, hole, canvas, 2) is None
