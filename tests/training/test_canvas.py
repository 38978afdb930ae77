"""The hole sampler and canvas builder produce the engine's documented layout."""

from __future__ import annotations

import numpy as np
import torch

from dllm_engine.default_model_config import default_model_config
from dllm_engine.layout import causal_mask
from dllm_engine.model import DiffusionTransformer
from dllm_engine.training.batches import BatchStream, StreamConfig
from dllm_engine.training.canvas import IGNORE, SpecialIds, build_canvas, collate, sample_example
from dllm_engine.training.holes import HoleSampler, length_range
from dllm_engine.training.objective import LossConfig, hidden_states, sample_canvas_mask
from dllm_engine.training.token_data import TokenCorpus

IDS = SpecialIds(pad=0, mask=1, suffix=3, prefix=4)


def _corpus(tiny_data):
    return TokenCorpus.open(tiny_data / "train")


def _sampler(tokenizer, corpus):
    return HoleSampler.from_vocab(tokenizer._tok.get_vocab(), corpus.newline_id)


def test_canvas_pads_short_holes_and_truncates_long_ones():
    assert build_canvas(np.array([7, 8, 9]), 8, pad_id=0).tolist() == [7, 8, 9, 0, 0, 0, 0, 0]
    assert build_canvas(np.arange(10, 20), 8, pad_id=0).tolist() == list(range(10, 18))  # n >= L: head, no pad
    assert build_canvas(np.arange(10, 18), 8, pad_id=0).tolist() == list(range(10, 18))


def test_line_holes_start_and_end_at_newline_boundaries(tokenizer, tiny_data):
    corpus = _corpus(tiny_data)
    sampler = _sampler(tokenizer, corpus)
    rng = np.random.default_rng(0)
    nl = corpus.newline_id
    kinds = set()
    for _ in range(300):
        f = corpus.file(int(rng.integers(corpus.num_files)))
        mode = ["first", "grown", "oracle", "loose"][int(rng.integers(4))]
        span = sampler.sample(rng, f, mode, 16)
        lo, hi = length_range(mode, 16)
        assert lo <= span.length <= hi or span.kind == "span" and span.length == len(f)
        kinds.add(span.kind)
        if span.kind in ("line", "lines", "block"):
            assert span.start == 0 or f[span.start - 1] == nl
            assert f[span.end - 1] == nl or span.end == len(f)
        if span.kind == "line_rest":
            assert span.end == len(f) or f[span.end] == nl  # the newline stays in the suffix
    assert {"line", "lines", "span"} <= kinds


def test_example_context_is_suffix_then_prefix_around_the_hole(tokenizer, tiny_data):
    corpus = _corpus(tiny_data)
    sampler = _sampler(tokenizer, corpus)
    rng = np.random.default_rng(3)
    for _ in range(50):
        ex = sample_example(rng, corpus, sampler, IDS, "loose", 16, 64, corpus.file_weights())
        ctx = ex.context.tolist()
        assert ctx[0] == IDS.suffix and ctx.count(IDS.prefix) == 1
        pre = ctx[ctx.index(IDS.prefix) + 1:]
        suf = ctx[1:ctx.index(IDS.prefix)]
        hole = ex.canvas[:ex.hole_len].tolist()
        whole = np.asarray(corpus.tokens).tolist()
        joined = pre + hole + suf
        # prefix + hole + suffix is a contiguous run of the corpus
        n = len(joined)
        assert any(whole[i:i + n] == joined for i in range(len(whole) - n + 1))
        assert ex.canvas[ex.hole_len:].tolist() == [IDS.pad] * (16 - ex.hole_len)
        assert 1 <= ex.hole_len < 16 and ex.head == 0 and len(ctx) <= 64 + 2  # budget counts prefix + suffix tokens


def test_batch_left_pads_and_masks_pads_out(tokenizer, tiny_data):
    corpus = _corpus(tiny_data)
    stream = BatchStream(corpus, _sampler(tokenizer, corpus), IDS, StreamConfig(batch_size=6, context_budget=48))
    b = stream.batch(0)
    t_max, length = b.context_ids.shape[1], b.canvas.shape[1]
    for i in range(6):
        n = int(b.context_lens[i])
        pads = t_max - n
        assert (b.next_targets[i, :pads] == IGNORE).all() and (b.next_targets[i, pads:] != IGNORE).all()
        assert b.positions[i, pads:t_max].tolist() == list(range(n))
        assert b.positions[i, t_max:].tolist() == list(range(n, n + length))
        m = b.mask[i, 0]
        assert not m[:, :pads].any(dim=0)[pads:].any() if pads else True  # nobody real sees a pad
        assert not m[pads:t_max, t_max:].any()  # context never sees the canvas
        assert m[t_max:, pads:].all()  # canvas sees all context and canvas
    assert stream.batch(0).canvas.equal(b.canvas)  # batch k is a function of (seed, k)


def test_training_forward_matches_cached_inference_forward(tokenizer, tiny_data):
    """Logits the loss sees equal the engine's path: causal context with KV cache, then the canvas."""
    torch.manual_seed(0)
    cfg = default_model_config(tokenizer, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1,
                               intermediate_size=64)
    model = DiffusionTransformer(cfg).eval()
    corpus = _corpus(tiny_data)
    b = BatchStream(corpus, _sampler(tokenizer, corpus), IDS, StreamConfig(batch_size=3, context_budget=40)).batch(1)
    t_max, length = b.context_ids.shape[1], b.canvas.shape[1]
    noisy = b.canvas.clone()
    noisy[:, ::2] = IDS.mask
    with torch.no_grad():
        train_logits = model.lm_head(hidden_states(model, torch.cat((b.context_ids, noisy), 1), b.positions, b.mask))
        for i in range(3):
            n = int(b.context_lens[i])
            ctx = b.context_ids[i:i + 1, t_max - n:]
            _, kv = model(ctx, torch.arange(n)[None], causal_mask(0, n, ctx.device), return_kv=True)
            canvas_logits, _ = model(noisy[i:i + 1], torch.arange(n, n + length)[None], None, past=kv)
            torch.testing.assert_close(canvas_logits[0], train_logits[i, t_max:], atol=1e-4, rtol=1e-4)


def test_decoder_states_match_the_engine(tokenizer, tiny_data):
    """First canvas: 8 slots, nothing committed; grown: head of L/2 never masked; oracle: fill == canvas."""
    corpus = _corpus(tiny_data)
    sampler = _sampler(tokenizer, corpus)
    rng = np.random.default_rng(5)
    p = corpus.file_weights()
    for _ in range(40):
        grown = sample_example(rng, corpus, sampler, IDS, "grown", 32, 64, p)
        assert grown.head == 16 and grown.hole_len >= 16
        assert (grown.canvas == IDS.pad).sum() == max(0, 32 - grown.hole_len)
        oracle = sample_example(rng, corpus, sampler, IDS, "oracle", 11, 64, p)
        assert oracle.hole_len == 11 and IDS.pad not in oracle.canvas.tolist()
    canvas = torch.full((64, 32), 7)
    heads = torch.tensor([16] * 32 + [0] * 32)
    masked, t = sample_canvas_mask(canvas, heads, torch.Generator().manual_seed(0), LossConfig())
    assert not masked[:32, :16].any() and masked.any(dim=1).all()
    assert ((t > 0) & (t <= 1)).all()
