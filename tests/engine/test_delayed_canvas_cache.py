"""The delayed canvas cache (DiffusionParams.canvas_cache="delayed") and the fused projections.

The delayed pass recomputes only the fresh slots and reads the others' K/V from an
earlier pass. When those kept K/V were computed on the same canvas it must give the
exact logits; the engine must finish every hole with it, with fewer slots run through
the model; the fused q/k/v and gate/up projections must not change the logits.
"""

import pytest
import torch

from dllm_engine.checkpoint import load
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest, ProtocolError
from dllm_engine.runner import ModelRunner


def _batch(lm, runner):
    tok, cfg = lm.tokenizer, lm.config
    texts = [("def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"),
             ("import os\n\ndef home():\n    ", "\n"),
             ("x = [1, 2, 3]\ny = ", "\nprint(y)\n")]
    contexts = [runner.encode_context(tok.encode(p), tok.encode(s), canvas_room=8) for p, s in texts]
    canvases = torch.full((3, 8), cfg.mask_token_id)
    canvases[0, :3] = torch.tensor(tok.encode(" a + b")[:3])
    canvases[1, [0, 4]] = torch.tensor(tok.encode("return os")[:2])
    lens = torch.tensor([8, 6, 8])
    valid = torch.arange(8)[None] < lens[:, None]
    canvases[~valid] = cfg.pad_token_id
    return contexts, canvases, lens, valid, (canvases == cfg.mask_token_id) & valid


def test_delayed_pass_with_kept_kv_from_the_same_canvas_is_exact(tiny_model):
    lm = load(str(tiny_model))
    runner = ModelRunner(lm, cache_bytes=64 * 2**20)
    with torch.inference_mode():
        contexts, canvases, lens, valid, masked = _batch(lm, runner)
        exact = runner.canvas_logits(contexts, canvases, lens, masked, compact=True)
        # Every slot fresh: the same logits, and the canvas K/V of this canvas.
        first, kv = runner.canvas_logits_delayed(contexts, canvases, lens, masked, valid.clone(), [None] * 3)
        torch.testing.assert_close(first, exact, atol=1e-5, rtol=1e-5)
        kept = [kv[:, :, row, :, : int(lens[row])].clone() for row in range(3)]
        # Only the masked slots fresh, the committed ones read from `kept`: still exact,
        # since `kept` was computed on this very canvas (rows with different fresh counts).
        runner.forget_batch()
        again, _ = runner.canvas_logits_delayed(contexts, canvases, lens, masked, masked.clone(), kept)
        torch.testing.assert_close(again, exact, atol=1e-5, rtol=1e-5)


def test_delayed_pass_reads_the_kept_kv(tiny_model):
    """Kept K/V that differ from what the canvas would give change the fresh slots' logits:
    the pass really reads them instead of recomputing the committed slots."""
    lm = load(str(tiny_model))
    runner = ModelRunner(lm, cache_bytes=64 * 2**20)
    with torch.inference_mode():
        contexts, canvases, lens, valid, masked = _batch(lm, runner)
        _, kv = runner.canvas_logits_delayed(contexts, canvases, lens, masked, valid.clone(), [None] * 3)
        views = [kv[:, :, row, :, : int(lens[row])] for row in range(3)]  # what the engine keeps
        exact, _ = runner.canvas_logits_delayed(contexts, canvases, lens, masked, masked.clone(), views)
        kept = [v.clone() for v in views]
        kept[0] = kept[0] + 1.0  # K/V from elsewhere (a copy) are read into the buffer
        moved, _ = runner.canvas_logits_delayed(contexts, canvases, lens, masked, masked.clone(), kept)
    rows0 = int(masked[0].sum())
    assert not torch.allclose(moved[:rows0], exact[:rows0], atol=1e-3)
    torch.testing.assert_close(moved[rows0:], exact[rows0:], atol=1e-5, rtol=1e-5)  # other rows untouched


def test_a_batch_buffer_reused_later_gets_the_holes_newer_kv(tiny_model):
    """Hole A alone, then A with B (a new buffer), then A alone again: the first buffer comes
    back from the runner's cache with K/V older than A's, and must take A's newer ones."""
    lm = load(str(tiny_model))
    runner = ModelRunner(lm, cache_bytes=64 * 2**20)
    tok, mask_id = lm.tokenizer, lm.config.mask_token_id
    with torch.inference_mode():
        contexts, canvases, lens, valid, masked = _batch(lm, runner)
        a, ab = [contexts[0]], contexts[:2]
        first = canvases[:1].clone()
        first[0, 3:] = mask_id  # A's canvas before two more commits
        _, kv = runner.canvas_logits_delayed(a, first, lens[:1], first == mask_id,
                                             torch.ones_like(first, dtype=torch.bool), [None])
        kept_a = kv[:, :, 0, :, :8]
        # A (now with two more committed tokens, recomputed as fresh) joins B in a new buffer.
        now = canvases[:2].clone()
        now[0, 3:5] = torch.tensor(tok.encode(" c d")[:2])
        fresh = (now == mask_id) & valid[:2]
        fresh[0, :5] = True
        fresh[1] = valid[1]
        _, kv = runner.canvas_logits_delayed(ab, now, lens[:2], (now == mask_id) & valid[:2], fresh, [kept_a, None])
        kept_a = kv[:, :, 0, :, :8]
        # A alone again: its old buffer is reused; only the masked slots are fresh.
        got, _ = runner.canvas_logits_delayed(a, now[:1], lens[:1], now[:1] == mask_id, now[:1] == mask_id, [kept_a])
        runner.forget_batch()
        want = runner.canvas_logits(a, now[:1], lens[:1], now[:1] == mask_id, compact=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_fused_projections_give_the_same_logits(tiny_model):
    with torch.inference_mode():
        lm = load(str(tiny_model))
        runner = ModelRunner(lm, cache_bytes=64 * 2**20)
        contexts, canvases, lens, _, masked = _batch(lm, runner)
        plain = runner.canvas_logits(contexts, canvases, lens).clone()
        state = {k: v.clone() for k, v in lm.model.state_dict().items()}
        lm.model.fuse_projections()
        runner.forget_batch()
        fused = runner.canvas_logits(contexts, canvases, lens)
        after = lm.model.state_dict()
    torch.testing.assert_close(fused, plain, atol=1e-5, rtol=1e-5)
    assert state.keys() == after.keys() and all(torch.equal(state[k], after[k]) for k in state)


@pytest.mark.parametrize("model", ["tiny", "small"])
def test_engine_finishes_every_hole_with_the_delayed_cache(tiny_model, model):
    engine = Engine(EngineConfig(model=str(tiny_model) if model == "tiny" else None, threads=1))
    computed: list[int] = []  # slots run through the model, per pass
    slots: list[int] = []  # slots an exact pass would run
    real = engine.runner.canvas_logits_delayed

    def counting(contexts, canvases, lens, rows, fresh, kept):
        computed.append(int(fresh.sum()))
        slots.append(int(lens.sum()))
        return real(contexts, canvases, lens, rows, fresh, kept)

    engine.runner.canvas_logits_delayed = counting
    holes = [Hole("def area(w, h):\n    return ", "\n", max_tokens=16),
             Hole("import os\n\ndef home():\n    ", "\n", max_tokens=16),
             Hole("for i in range(3):\n    ", "\nprint('done')\n", max_tokens=12)]
    try:
        params = DiffusionParams(threshold=1.0, canvas_cache="delayed")  # one token per pass: many passes
        result = engine.infill(InfillRequest(holes=holes, params=params))
        exact = engine.infill(InfillRequest(holes=holes, params=DiffusionParams(threshold=1.0)))
    finally:
        engine.shutdown()
    for got, ref in zip(result.holes, exact.holes):
        assert got.finish_reason in ("end", "max_tokens") and got.tokens <= 16
        assert sum(got.committed_per_pass) >= got.tokens
    assert len(computed) >= result.passes  # every pass went through the delayed path
    assert sum(computed) < 0.8 * sum(slots)  # committed slots were not recomputed


def test_canvas_cache_is_validated():
    with pytest.raises(ProtocolError, match="canvas_cache"):
        InfillRequest.from_dict({"holes": [{"prefix": "x"}], "params": {"canvas_cache": "sometimes"}})
    assert InfillRequest.from_dict({"holes": [{"prefix": "x"}],
                                    "params": {"canvas_cache": "delayed"}}).params.canvas_cache == "delayed"


def test_slots_rewritten_after_an_end_are_recomputed():
    """advance() pads everything after a committed end token; a kept slot among them must be
    recomputed (its K/V belong to the old token), and a grown canvas is recomputed whole."""
    from dllm_engine.canvas_rules import advance, forget_rewritten
    from dllm_engine.denoise import SpecialIds
    from dllm_engine.scheduler import ActiveHole

    special = SpecialIds(mask=1, end=(0,), banned=(1,))
    state = type("S", (), {"request": InfillRequest(holes=[Hole("x")])})()
    # slots: 7 <mask> <pad> <mask> 9 <mask>; slot 4 (token 9) is kept from an earlier pass
    canvas = torch.tensor([7, 1, 0, 1, 9, 1])
    a = ActiveHole(state=state, index=0, context=None, canvas=canvas.clone(), max_tokens=16, generator=None)
    a.frozen = torch.tensor([True, False, False, False, True, False])
    a.canvas_kv = torch.zeros(1, 2, 1, 6, 4)
    before = a.canvas.clone()
    assert advance(a, special) is None  # slot 1 is still masked: the fill goes on
    forget_rewritten(a, before)
    assert a.canvas.tolist() == [7, 1, 0, 0, 0, 0]  # padding after the end
    assert a.frozen.tolist() == [True, False, False, False, False, False]  # slot 4 is recomputed

    grown = ActiveHole(state=state, index=0, context=None, canvas=torch.tensor([7, 8]), max_tokens=4,
                       generator=None)
    grown.frozen, grown.canvas_kv = torch.tensor([True, True]), torch.zeros(1, 2, 1, 2, 4)
    before = grown.canvas.clone()
    assert advance(grown, special) is None and grown.canvas.numel() == 4
    forget_rewritten(grown, before)
    assert grown.frozen is None and grown.canvas_kv is None
