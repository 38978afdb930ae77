"""The native context cache is exact: cached and uncached logits are equal."""

import torch

from dllm_engine.checkpoint import load
from dllm_engine.layout import native_context_ids
from dllm_engine.runner import ModelRunner


def full_canvas_logits(model, cfg, ctx_ids, canvas):
    """Reference: context + canvas in one forward with the native mask, nothing cached."""
    t, l = len(ctx_ids), canvas.numel()
    ids = torch.tensor(ctx_ids + canvas.tolist())[None]
    pos = torch.arange(t + l)[None]
    rows = torch.arange(t + l)[:, None]
    cols = torch.arange(t + l)[None, :]
    mask = torch.where(rows >= t, torch.ones_like(cols, dtype=torch.bool), (cols <= rows))
    logits, _ = model(ids, pos, mask=mask[None, None])
    return logits[0, t:]


def test_cached_equals_uncached(tiny_model):
    lm = load(str(tiny_model))
    runner = ModelRunner(lm, cache_bytes=64 * 2**20)
    tok, cfg = lm.tokenizer, lm.config
    prefix, suffix = tok.encode("def add(a, b):\n    return "), tok.encode("\n\nprint(add(1, 2))\n")
    canvas = torch.full((8,), cfg.mask_token_id)
    canvas[2] = tok.encode(" a")[0]
    with torch.inference_mode():
        ref = full_canvas_logits(lm.model, cfg, native_context_ids(prefix, suffix, cfg), canvas)
        ctx = runner.encode_context(prefix, suffix, canvas_room=8)
        got = runner.canvas_logits([ctx], canvas[None], torch.tensor([8]))[0]
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)


def test_prefix_reuse_encodes_only_the_tail(tiny_model):
    lm = load(str(tiny_model))
    runner = ModelRunner(lm, cache_bytes=64 * 2**20)
    tok, cfg = lm.tokenizer, lm.config
    suffix = tok.encode("\n    return total\n")
    text = "def total(xs):\n    total = 0\n    for x in xs:\n        total +"
    first = runner.encode_context(tok.encode(text), suffix, 8)
    assert first.reused == 0
    typed = runner.encode_context(tok.encode(text + "="), suffix, 8)
    # Everything but the retokenised tail comes from the cache.
    assert typed.reused >= typed.length - 3
    assert runner.cache.stats.tokens_reused == typed.reused
    # ...and the reused K/V give the same logits as a fresh encoding.
    fresh = ModelRunner(lm, cache_bytes=64 * 2**20).encode_context(tok.encode(text + "="), suffix, 8)
    torch.testing.assert_close(typed.kv, fresh.kv, atol=1e-5, rtol=1e-5)


def test_cache_is_bounded_and_evicts_lru(tiny_model):
    lm = load(str(tiny_model))
    one = ModelRunner(lm, cache_bytes=1 << 30).encode_context([5] * 300, [6] * 10, 8)
    runner = ModelRunner(lm, cache_bytes=int(one.kv.numel() * 4 * 2.5))
    for i in range(6):
        runner.encode_context([7 + i] * 300, [6] * 10, 8)
    assert len(runner.cache) <= 3
    assert runner.cache.nbytes <= runner.cache.max_bytes or len(runner.cache) == 1


def test_trimming_to_the_trained_context_keeps_a_stable_start():
    from dllm_engine.runner import PREFIX_TRIM_STEP, trim_to_trained

    prefix, suffix = list(range(1000)), list(range(5000, 5300))
    p1, s1 = trim_to_trained(prefix, suffix, 254)
    assert len(p1) + len(s1) <= 254 and s1 == suffix[:63] and p1[-1] == 999
    # A typed token appends to the prefix; the kept prefix starts at the same token (cache hit)
    # until the cut moves by a whole step.
    p2, _ = trim_to_trained(prefix + [1000], suffix, 254)
    assert p2[0] == p1[0] or p2[0] == p1[0] + PREFIX_TRIM_STEP
    starts = {trim_to_trained(prefix + list(range(1000, 1000 + k)), suffix, 254)[0][0] for k in range(64)}
    assert len(starts) <= 3
    assert trim_to_trained([1, 2], [3], 254) == ([1, 2], [3])


def test_batched_encoding_equals_one_at_a_time(tiny_model):
    """encode_contexts: fresh contexts of different lengths in one padded forward give the
    K/V that encoding each alone gives; a cached one reuses its prefix; a too-long one fails alone."""
    from dllm_engine.protocol import ProtocolError

    lm = load(str(tiny_model), dtype=torch.float32)
    tok = lm.tokenizer
    texts = [("def f(x):\n    return ", "\n"), ("import os\n\nclass A:\n    pass\n", ""), ("x = 1\n", "\ny = 2\n")]
    reqs = [(tok.encode(p), tok.encode(s), 8) for p, s in texts]
    alone = ModelRunner(lm, cache_bytes=64 * 2**20)
    together = ModelRunner(lm, cache_bytes=64 * 2**20)
    with torch.inference_mode():
        ref = [alone.encode_context(*r) for r in reqs]
        got = together.encode_contexts(reqs + [(list(range(5, 1500)), [], 8)])
    assert isinstance(got[-1], ProtocolError)  # over the window: only that one fails
    for a, b in zip(ref, got[:3]):
        assert a.length == b.length and b.reused == a.reused  # the same shared head (`<suf>`, ...)
        torch.testing.assert_close(b.kv, a.kv, atol=1e-5, rtol=1e-5)
    assert together.cache.stats.lookups == 3  # one per context that fits, as alone
    again = together.encode_contexts([(reqs[0][0] + tok.encode("x"), reqs[0][1], 8), reqs[1]])
    assert again[0].reused > 0 and again[1].reused == again[1].length - 1  # from the cache


def test_a_context_held_whole_needs_no_forward(tiny_model, monkeypatch):
    lm = load(str(tiny_model), dtype=torch.float32)
    runner = ModelRunner(lm, cache_bytes=64 * 2**20)
    tok = lm.tokenizer
    req = (tok.encode("def f(x):\n    return "), tok.encode("\n"), 8)
    with torch.inference_mode():
        first = runner.encode_context(*req)
        monkeypatch.setattr(runner.model, "forward", lambda *a, **k: (_ for _ in ()).throw(AssertionError("forward")))
        again = runner.encode_context(*req)
    assert again.reused == again.length == first.length
    torch.testing.assert_close(again.kv, first.kv)


def test_kv_only_gives_the_same_kv_and_skips_the_last_layers_output(tiny_model):
    lm = load(str(tiny_model))
    ids = torch.tensor(lm.tokenizer.encode("def add(a, b):\n    return a + b\n"))[None]
    pos = torch.arange(ids.shape[1])[None]
    calls = []
    last_mlp = lm.model.model.layers[-1].mlp
    hook = last_mlp.register_forward_hook(lambda *a: calls.append(1))
    with torch.inference_mode():
        _, full = lm.model(ids, pos, mask=None, return_kv=True)
        assert calls == [1]
        logits, kv = lm.model(ids, pos, mask=None, kv_only=True)
    hook.remove()
    assert logits is None and calls == [1]  # the last layer's MLP did not run again
    assert len(kv) == len(full)
    for (k, v), (k_ref, v_ref) in zip(kv, full):
        torch.testing.assert_close(k, k_ref, atol=0, rtol=0)
        torch.testing.assert_close(v, v_ref, atol=0, rtol=0)


def test_a_context_in_a_new_place_is_encoded_from_its_first_token(tiny_model):
    """A cursor moved elsewhere shares only the context's first marker with the cache: the
    context is encoded from its first token (plain-causal attention), with the K/V that the
    explicit causal mask gives; a long shared start is still reused."""
    from dllm_engine.layout import causal_mask

    lm = load(str(tiny_model), dtype=torch.float32)
    runner = ModelRunner(lm, cache_bytes=64 * 2**20)
    tok = lm.tokenizer
    body = "def total(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n" * 3
    with torch.inference_mode():
        runner.encode_context(tok.encode(body), tok.encode("\nprint(total([1]))\n"), 8)
        moved = runner.encode_context(tok.encode(body[:90]), tok.encode(body[90:]), 8)
        assert moved.reused == 0 and moved.length > 40
        _, ref = lm.model(moved.ids[None], torch.arange(moved.length)[None],
                          mask=causal_mask(0, moved.length, "cpu"), kv_only=True)
        typed = runner.encode_context(tok.encode(body[:90] + "x"), tok.encode(body[90:]), 8)
    for i, (k, v) in enumerate(ref):
        torch.testing.assert_close(moved.kv[i, 0], k[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(moved.kv[i, 1], v[0], atol=1e-5, rtol=1e-5)
    assert typed.reused >= typed.length - 3  # typing at the new place reuses it
