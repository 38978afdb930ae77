"""Scoring existing code: every token gets the model's probability and alternative."""

import math

import pytest
import torch

from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import ProtocolError, ScoreRequest


@pytest.fixture(scope="module")
def engine(tiny_model):
    e = Engine(EngineConfig(model=str(tiny_model), threads=1))
    yield e
    e.shutdown()


def test_every_token_is_scored_with_offsets(engine):
    span = "    total = totl + 1\n"
    r = engine.score(ScoreRequest(prefix="def f(total):\n", span=span, suffix="    return total\n"))
    assert "".join(t.text for t in r.tokens) == span
    assert all(0.0 <= t.prob <= 1.0 and t.alternative_prob >= t.prob - 1e-6 for t in r.tokens)
    assert [span[t.start:t.end] for t in r.tokens] == [t.text for t in r.tokens]


@torch.inference_mode()
def test_scores_match_masking_one_token_at_a_time(engine):
    """stride=4 in one batch gives what four separate masked passes give."""
    prefix, span, suffix = "x = [", "1, 2, 3, 4, 5", "]\n"
    batched = engine.score(ScoreRequest(prefix=prefix, span=span, suffix=suffix, stride=4))
    ids = engine.tokenizer.encode(span)
    runner = engine.runner
    ctx = runner.encode_context(engine.tokenizer.encode(prefix), engine.tokenizer.encode(suffix), len(ids))
    for j in range(len(ids)):
        canvas = torch.tensor(ids)
        canvas[torch.arange(len(ids)) % 4 == j % 4] = engine.special.mask
        logits = runner.canvas_logits([ctx], canvas[None], torch.tensor([len(ids)]))[0].float()
        logits[:, list(engine.special.banned)] = float("-inf")
        p = logits.softmax(-1)[j, ids[j]]
        assert abs(float(p) - batched.tokens[j].prob) < 1e-4
    runner.forget_batch()


def test_bad_score_requests(engine):
    with pytest.raises(ProtocolError):
        engine.score(ScoreRequest(prefix="", span=""))
    with pytest.raises(ProtocolError):
        engine.score(ScoreRequest(prefix="", span="x", stride=0))


def test_a_span_longer_than_one_window_is_scored_whole(engine):
    """The language server scores up to 3,000 characters at once (a file's head when it opens):
    more than one window of tokens is scored window by window, not refused."""
    from dllm_engine.scoring import MASKED_WINDOW_TOKENS

    span = "".join(f"value_{i} = compute(value_{i - 1}, {i})\n" for i in range(1, 90))
    assert len(engine.tokenizer.encode(span)) > MASKED_WINDOW_TOKENS and len(span) <= 4000
    r = engine.score(ScoreRequest(prefix="def run():\n", span=span, suffix="print(value_89)\n"))
    assert "".join(t.text for t in r.tokens) == span
    assert all(0.0 <= t.prob <= 1.0 and t.alternative_prob >= t.prob - 1e-6 for t in r.tokens)


@pytest.fixture(scope="module")
def causal_engine(tiny_shifted_model):
    # float32 on every CPU: the comparisons below run the same rows in passes of other widths
    e = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1, dtype="float32"))
    yield e
    e.shutdown()


@torch.inference_mode()
def _first_slot_probs(engine, prefix_ids, suffix_ids, trim=True):
    """The probabilities the engine's fill reads for its first slot after `prefix_ids` (`trim`:
    as runner.encode_context's)."""
    runner = engine.runner
    ctx = runner.encode_context(prefix_ids, suffix_ids, 1, trim)
    canvas = torch.tensor([[engine.special.mask]])
    logits = runner.canvas_logits([ctx], canvas, torch.tensor([1]))[0, 0].float()
    runner.forget_batch()
    logits[list(engine.special.banned)] = float("-inf")
    return logits.softmax(-1)


def test_a_causal_model_scores_each_token_as_its_own_fill_would(causal_engine):
    """A shifted-logit model decoded in blocks of 1 reads causally: a token's score is the
    probability the engine's own fill gives it at that place (the code before it, the suffix
    as context), not a strided masked pass that hides some of the tokens before it."""
    engine = causal_engine
    prefix, span, suffix = "def f(total):\n", "    total = totl + 1\n", "    return total\n"
    r = engine.score(ScoreRequest(prefix=prefix, span=span, suffix=suffix, stride=4))
    ids = engine.tokenizer.encode(span)
    prefix_ids, suffix_ids = engine.tokenizer.encode(prefix), engine.tokenizer.encode(suffix)
    assert len(r.tokens) == len(ids) > 4
    for j, token in enumerate(r.tokens):
        probs = engine.between_passes(lambda j=j: _first_slot_probs(engine, prefix_ids + ids[:j], suffix_ids))
        assert math.isclose(float(probs[ids[j]]), token.prob, rel_tol=1e-4, abs_tol=1e-9), j
        assert math.isclose(float(probs.max()), token.alternative_prob, rel_tol=1e-4, abs_tol=1e-9), j


def test_windows_of_a_causal_span_score_as_one(causal_engine, monkeypatch):
    from dllm_engine import scoring

    request = ScoreRequest(prefix="x = [", span="1, 2, 3, 4, 5, 6, 7", suffix="]\n")
    whole = causal_engine.score(request)
    monkeypatch.setattr(scoring, "WINDOW_TOKENS", 3)
    windowed = causal_engine.score(request)
    assert [t.text for t in windowed.tokens] == [t.text for t in whole.tokens]
    assert all(math.isclose(a.prob, b.prob, rel_tol=1e-4, abs_tol=1e-9) for a, b in zip(whole.tokens, windowed.tokens))
    assert [t.alternative for t in windowed.tokens] == [t.alternative for t in whole.tokens]


def test_scoring_leaves_no_context_in_the_cache(causal_engine):
    """A scoring context (the code around a changed region) is a one-off: kept, the language
    server's hints filled the context cache with them, pushing the completions' contexts out."""
    from dllm_engine.protocol import Hole, InfillRequest

    engine = causal_engine
    engine.infill(InfillRequest(holes=[Hole(prefix="def f(total):\n    ", suffix="\n", max_tokens=2)]))
    before = len(engine.runner.cache)
    engine.score(ScoreRequest(prefix="def g(x):\n", span="    return x + 1\n", suffix="print(g(2))\n"))
    engine.score(ScoreRequest(prefix="x = [", span="1, 2, 3, 4, 5, 6, 7", suffix="]\n"))
    assert len(engine.runner.cache) == before


def test_only_background_scoring_waits_for_the_engine_to_go_idle(engine, monkeypatch):
    """The language server's hints yield to requests; a caller's own scoring (/v1/score, next
    edit on a model without the streamed region pass) runs between passes as before."""
    from dllm_engine.engine import SCORE_PATIENCE_S

    waited = []
    real = engine._calls.call_when_idle
    monkeypatch.setattr(engine._calls, "call_when_idle",
                        lambda fn, idle, patience, kind: waited.append((patience, kind)) or real(fn, idle, patience, kind))
    engine.score(ScoreRequest(prefix="x = ", span="1 + 2"))
    assert waited == []
    engine.score(ScoreRequest(prefix="x = ", span="1 + 2", background=True))
    assert waited and set(waited) == {(SCORE_PATIENCE_S, "scoring")}
    with pytest.raises(ProtocolError):
        engine.score(ScoreRequest(prefix="x = ", span="1 + 2", background="yes"))


def test_a_windows_context_is_encoded_a_chunk_per_engine_call(causal_engine, monkeypatch):
    """The context around a changed region (~1,000 tokens) encoded in one engine call held the
    engine ~1.3 s on 2 cores while the keystroke that ended the rest waited: it is encoded a
    chunk per call, each onto the one before, and the window's own call encodes nothing more."""
    from dllm_engine import scoring

    engine = causal_engine
    request = ScoreRequest(prefix="def f(total):\n    count = 0\n" * 3, span="    return totl\n", suffix="f(1)\n")
    whole = engine.score(request)
    monkeypatch.setattr(scoring, "CONTEXT_CHUNK", 5)
    encoded, scored_after = [], []
    real_tokens, real_context = engine.runner.encode_tokens, engine.runner.encode_context
    monkeypatch.setattr(engine.runner, "encode_tokens", lambda ids: encoded.append(ids.numel()) or real_tokens(ids))

    def context(*args):
        ctx = real_context(*args)
        scored_after.append((ctx.length, ctx.reused))
        return ctx

    monkeypatch.setattr(engine.runner, "encode_context", context)
    chunked = engine.score(request)
    assert len(encoded) > 3 and all(0 < b - a <= 5 for a, b in zip(encoded, encoded[1:]))
    assert scored_after == [(encoded[-1], encoded[-1])]  # the window's rows read a context cached whole
    assert [t.alternative for t in chunked.tokens] == [t.alternative for t in whole.tokens]
    assert all(math.isclose(a.prob, b.prob, rel_tol=1e-4, abs_tol=1e-9) for a, b in zip(whole.tokens, chunked.tokens))


def test_a_request_between_a_scorings_chunks_keeps_its_context(causal_engine, monkeypatch):
    """Requests run between the chunks; once the span is scored its contexts are forgotten,
    the request's context (stored meanwhile) stays in the cache."""
    from dllm_engine import scoring
    from dllm_engine.protocol import Hole, InfillRequest
    from dllm_engine.scoring import score_span

    engine = causal_engine
    monkeypatch.setattr(scoring, "CONTEXT_CHUNK", 4)
    hole = Hole(prefix="def g(items):\n    return ", suffix="\n", max_tokens=2)
    done, chunks = [], []
    real_tokens = engine.runner.encode_tokens
    monkeypatch.setattr(engine.runner, "encode_tokens", lambda ids: chunks.append(ids) or real_tokens(ids))

    def call(fn):
        out = engine.between_passes(fn)
        if not done and chunks:  # a chunk is cached: a keystroke's request comes
            done.append(engine.infill(InfillRequest(holes=[hole])))
        return out

    before = len(engine.runner.cache)
    span = "1, 2, 3, 4, 5"
    result = score_span(engine, ScoreRequest(prefix="x = [\n" * 4, span=span, suffix="]\n"), call=call)
    assert done and len(chunks) > 2 and len(result.tokens) == len(engine.tokenizer.encode(span))
    prefix_ids, suffix_ids, *_ = engine._tokenize(hole)
    ids = engine.runner.cache_ids(prefix_ids, suffix_ids)
    assert engine.runner.cache.lookup(ids, count=False, full=True)[2] == ids.numel()
    assert len(engine.runner.cache) <= before + 1


def test_later_windows_extend_the_first_windows_context(causal_engine, monkeypatch):
    """With a context budget (config extra `context_tokens`) the prefix is trimmed once, for the
    first window; every later window keeps that start and appends the span before it, whose K/V
    its window's rows left in the cache: only the first context is encoded (trimmed on its own,
    a later window's context started further on and was encoded whole again), each token still
    scores as its own fill would there, and the cache is left as it was."""
    from dllm_engine import scoring

    engine, runner = causal_engine, causal_engine.runner
    prefix = "".join(f"a_{i} = {i}\n" for i in range(30))
    span, suffix = "".join(f"b_{i} = a_{i} + 1\n" for i in range(12)), "print(b_11)\n"
    prefix_ids, ids = engine.tokenizer.encode(prefix), engine.tokenizer.encode(span)
    suffix_ids = engine.tokenizer.encode(suffix)
    monkeypatch.setitem(runner.config.extra, "context_tokens", 100)
    monkeypatch.setattr(scoring, "WINDOW_TOKENS", 40)  # more than the trim's step: trimmed alone, each window moved it
    assert len(prefix_ids) > 100 and len(ids) > 2 * 40
    encoded = []
    real_encode = runner._encode

    def counting(ids_, count=True):
        ctx = real_encode(ids_, count)
        encoded.append(ctx.length - ctx.reused)
        return ctx

    monkeypatch.setattr(runner, "_encode", counting)
    engine.drop_caches()
    r = engine.score(ScoreRequest(prefix=prefix, span=span, suffix=suffix))
    assert "".join(t.text for t in r.tokens) == span
    start, after = scoring._nested_start(runner, prefix_ids, suffix_ids, len(ids))
    first = len(runner.cache_ids(prefix_ids[start:], after, trim=False)) + 1  # and its held-out last token
    assert 0 < start and sum(encoded) <= first  # later contexts: the rows' K/V, nothing encoded twice
    assert len(runner.cache) == 0  # and none of them left in the cache
    monkeypatch.setattr(runner, "_encode", real_encode)
    for j in (0, 45, 85, len(ids) - 1):  # a token of each window, as a fill there would read it
        before = (prefix_ids + ids[:j])[start:]
        probs = engine.between_passes(lambda: _first_slot_probs(engine, before, after, trim=False))
        assert math.isclose(float(probs[ids[j]]), r.tokens[j].prob, rel_tol=1e-4, abs_tol=1e-9), j


def test_windows_are_trimmed_one_by_one_where_the_span_does_not_fit_the_window(causal_engine, monkeypatch):
    from dllm_engine import scoring
    from dllm_engine.runner import trim_to_trained

    runner = causal_engine.runner
    prefix, suffix = list(range(5, 100)), [5, 6]
    monkeypatch.setitem(runner.config.extra, "context_tokens", 48)
    start, after = scoring._nested_start(runner, prefix, suffix, 40)
    assert (prefix[start:], after) == trim_to_trained(prefix, suffix, 46)  # the first window's, as a request's
    assert scoring._nested_start(runner, prefix, suffix, runner.window) is None  # past the window
    monkeypatch.delitem(runner.config.extra, "context_tokens")
    assert scoring._nested_start(runner, prefix, suffix, 40) is None  # no budget: nothing trimmed


def test_rows_extend_a_context_only_when_it_is_one_whole_chain(causal_engine):
    runner = causal_engine.runner
    ctx = runner.encode_context([5, 6, 7, 8], [9], 4)
    with pytest.raises(ValueError, match="one context"):
        runner.score_rows([ctx], torch.tensor([[3, 4, 5]]), torch.tensor([2]), extend=True)
    with pytest.raises(ValueError, match="one context"):
        runner.score_rows([ctx, ctx], torch.tensor([[3, 4, 5], [3, 4, 5]]), torch.tensor([3, 3]), extend=True)
