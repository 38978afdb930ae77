"""Draft rows (draft_adapter.py): the adapter acts on the draft rows alone, so every other
row, and every committed token, is the base's own; its guesses are checked like any draft.

A tiny random shifted-logit model decoded in blocks of 1 (the default model's decoding) and a
random adapter with large weights: if the adapter leaked into any row but the draft rows,
the fills would change. fp32, so "the same" is exact."""

import pytest
import torch

from dllm_engine import draft_adapter
from dllm_engine.checkpoint import load
from dllm_engine.layout import causal_mask
from dllm_engine.model_config import CheckpointError
from dllm_engine.protocol import Hole, InfillRequest



@pytest.fixture(scope="module")
def shifted_model(tiny_shifted_model):
    return tiny_shifted_model


def random_adapter(model, rows=3, scale=0.5, seed=0):
    torch.manual_seed(seed)
    adapter = draft_adapter.init_from_base(model, model.config.mask_token_id, rank=8, rows=rows)
    with torch.no_grad():
        for p in adapter.parameters():
            p.normal_(std=scale)
    return adapter


@pytest.fixture(scope="module")
def adapter_dir(shifted_model, tmp_path_factory):
    loaded = load(str(shifted_model))
    folder = tmp_path_factory.mktemp("adapter")
    random_adapter(loaded.model).save(folder)
    return folder


def test_the_adapter_changes_the_draft_rows_and_nothing_else(shifted_model):
    loaded = load(str(shifted_model))
    model, cfg = loaded.model, loaded.config
    ids = torch.randint(10, 200, (2, 12))
    ids[:, 8:] = cfg.mask_token_id  # the last four rows stand in for draft rows
    draft = ids == cfg.mask_token_id
    pos = torch.arange(12)[None].expand(2, -1)
    mask = causal_mask(0, 12, ids.device)
    with torch.no_grad():
        plain, _ = model(ids, pos, mask=mask)
        model.draft_adapter = random_adapter(model)
        adapted, _ = model(ids, pos, mask=mask, draft_rows=draft)
        unasked, _ = model(ids, pos, mask=mask)  # attached, but no rows named: the base alone
    assert torch.equal(adapted[~draft], plain[~draft])  # causal rows before the draft rows: bit for bit
    assert not torch.allclose(adapted[draft], plain[draft])
    assert torch.equal(unasked, plain)


def test_fills_are_the_same_with_draft_rows_on_and_off(shifted_model, adapter_dir):
    from dllm_engine.engine import Engine, EngineConfig

    holes = [Hole(prefix="def add(a, b):\n    return ", suffix="\n", max_tokens=12),
             Hole(prefix="x = 1\ny = ", suffix="\nprint(x + y)\n", max_tokens=10),
             Hole(prefix="import os\n\npath = os.", suffix="\n", max_tokens=14)]
    base = dict(model=str(shifted_model), threads=1, dtype="float32", heal=False)
    on = Engine(EngineConfig(**base, draft_rows=3, draft_adapter=str(adapter_dir)))
    off = Engine(EngineConfig(**base, draft_rows=0))
    try:
        assert on.draft_rows == 3 and off.draft_rows == 0
        assert on.loaded.model.draft_adapter is not None
        alone_on = [on.infill(InfillRequest(holes=[h])).holes[0] for h in holes]
        alone_off = [off.infill(InfillRequest(holes=[h])).holes[0] for h in holes]
        batched = on.infill(InfillRequest(holes=holes)).holes
        for a, b, c in zip(alone_on, alone_off, batched):
            assert a.text == b.text == c.text
            assert a.tokens == b.tokens == c.tokens
    finally:
        on.shutdown()
        off.shutdown()


def test_a_draft_rows_guess_is_checked_before_it_is_committed(shifted_model, adapter_dir, monkeypatch):
    """The guesses of a pass's draft rows are the next pass's draft: they are run as draft
    tokens (so the model checks them), and each pass after the first runs draft rows."""
    from dllm_engine import drafting
    from dllm_engine.engine import Engine, EngineConfig

    seen = []
    real = drafting.row_drafts

    def spy(active, canvases, window, drafts, limit, rows):
        out = real(active, canvases, window, drafts, limit, rows)
        seen.append((None if out[0] is None else int((out[0] >= 0).sum()), None if out[1] is None else int(out[1].sum())))
        return out

    monkeypatch.setattr("dllm_engine.engine.row_drafts", spy)
    engine = Engine(EngineConfig(model=str(shifted_model), threads=1, dtype="float32", heal=False,
                                 draft_rows=2, draft_adapter=str(adapter_dir)))
    try:
        res = engine.infill(InfillRequest(holes=[Hole(prefix="value = ", suffix="\n", max_tokens=12)])).holes[0]
    finally:
        engine.shutdown()
    assert res.passes == len(seen)
    assert seen[0][1] == 2  # the first pass already runs its two draft rows
    assert any(d for d, _ in seen[1:]), "no pass checked a draft rows' guess"


def test_attach_refuses_what_does_not_fit(shifted_model, tmp_path):
    loaded = load(str(shifted_model))
    assert draft_adapter.attach(loaded, "none") is None
    assert draft_adapter.attach(loaded, "shipped") is None  # a folder model names no base: nothing shipped
    with pytest.raises(CheckpointError, match="no draft_adapter.json"):
        draft_adapter.attach(loaded, str(tmp_path))
    other = draft_adapter.DraftAdapter(draft_adapter.DraftAdapterConfig(hidden_size=32, num_layers=1, rank=4,
                                                                        base="elsewhere"))
    other.save(tmp_path / "other")
    with pytest.raises(CheckpointError, match="does not fit"):
        draft_adapter.attach(loaded, str(tmp_path / "other"))
