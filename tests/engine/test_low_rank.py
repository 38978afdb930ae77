"""The base's own adapter at inference (low_rank.py): beside fused projections it computes what
the training wrap computes, a folder for another model is refused before anything changes, and
the engine decodes with it (and without it, by name)."""

import pytest
import torch

from dllm_engine import low_rank
from dllm_engine.checkpoint import load
from dllm_engine.layout import causal_mask
from dllm_engine.model_config import CheckpointError
from dllm_engine.training import base_lora
from dllm_engine.weight_only import DENSE_ROWS, Int8RowLinear, int4_available


def _logits(model, ids):
    pos = torch.arange(ids.shape[1])[None]
    with torch.no_grad():
        return model(ids, pos, mask=causal_mask(0, ids.shape[1], ids.device))[0]


@pytest.fixture()
def adapter(tmp_path):
    torch.manual_seed(1)
    model = load("small", dtype=torch.float32).model
    for p in base_lora.attach(model, rank=4, alpha=8.0):
        p.data.normal_(0, 0.05)
    base_lora.save(model, tmp_path / "lora")
    return tmp_path / "lora", model


def test_beside_fused_projections_it_computes_what_training_computed(adapter):
    folder, trained = adapter
    ids = torch.randint(10, 200, (2, 20))
    want = _logits(trained, ids)
    loaded = load("small", dtype=torch.float32)
    plain = _logits(loaded.model, ids)
    loaded.model.fuse_projections()
    meta = low_rank.attach(loaded, str(folder))
    assert meta["rank"] == 4
    got = _logits(loaded.model, ids)
    assert torch.allclose(got, want, atol=1e-4) and (got - plain).abs().max() > 1e-2
    layer = loaded.model.model.layers[0]
    assert isinstance(layer.self_attn.qkv, low_rank.LowRankAdded) and layer.self_attn.qkv.a.shape[0] == 12


def test_unfused_projections_take_it_one_by_one(adapter):
    folder, trained = adapter
    ids = torch.randint(10, 200, (1, 16))
    loaded = load("small", dtype=torch.float32)
    low_rank.attach(loaded, str(folder))
    assert torch.allclose(_logits(loaded.model, ids), _logits(trained, ids), atol=1e-4)


def test_a_folder_without_an_adapter_or_for_another_model_is_refused(adapter, tmp_path):
    folder, _ = adapter
    loaded = load("small", dtype=torch.float32)
    with pytest.raises(CheckpointError, match="no lora.json"):
        low_rank.attach(loaded, str(tmp_path / "empty"))
    meta, tensors = low_rank.read(folder)
    key = next(k for k in tensors if k.endswith("q_proj.lora_b"))
    tensors[key] = torch.zeros(tensors[key].shape[0] + 8, tensors[key].shape[1])
    before = [type(layer.self_attn.o_proj) for layer in loaded.model.model.layers]
    loaded.model.fuse_projections()
    with pytest.raises(ValueError, match="another base"):
        low_rank.attach_to(loaded.model, meta, tensors)
    assert [type(layer.self_attn.o_proj) for layer in loaded.model.model.layers] == before  # nothing changed
    assert low_rank.attach(loaded, "none") is None


def test_the_engine_fills_with_a_folder_adapter_and_without_one(adapter):
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    folder, _ = adapter
    fills = {}
    for where in ("none", str(folder)):
        engine = Engine(EngineConfig(model="small", threads=1, base_adapter=where))
        try:
            assert (engine.base_adapter is None) == (where == "none")
            assert where == "none" or engine.base_adapter["rank"] == 4
            assert (engine.health()["base_adapter"] is None) == (where == "none")
            req = InfillRequest(holes=[Hole(prefix="def add(a, b):\n    return ", suffix="\n", max_tokens=8)])
            fills[where] = engine.infill(req).holes[0]
        finally:
            engine.shutdown()
    assert all(f.passes >= 1 for f in fills.values())


def test_a_model_of_another_definition_is_refused_with_a_clear_error(adapter):
    folder, _ = adapter
    meta, tensors = low_rank.read(folder)
    with pytest.raises(ValueError, match="own model definition"):
        low_rank.attach_to(torch.nn.Linear(4, 4), meta, tensors)


@pytest.mark.skipif(not int4_available(), reason="this torch has no CPU weight-only kernels")
def test_weight_only_factors_run_a_pass_through_the_int8_kernel_and_compute_nearly_the_same():
    """weight_only (an engine whose base runs weight-only kernels): a pass's few rows run A and B
    through torch's int8 kernel, its per-row rounding ~1% of B (A x) itself; from
    weight_only.DENSE_ROWS rows on they multiply exactly as without it. A rank the kernel
    cannot take (8: torch's int8 kernel multiplies wrong) stays in the model's dtype."""
    torch.manual_seed(0)
    base = torch.nn.Linear(64, 96, bias=False)
    odd = low_rank.LowRankAdded(base, torch.randn(8, 64), torch.randn(96, 8), weight_only=True)
    assert odd.down is None
    with pytest.raises(ValueError, match="multiples of 16"):
        Int8RowLinear(torch.randn(96, 8))
    a, b = torch.randn(16, 64) * 0.1, torch.randn(96, 16) * 0.1
    dense, int8 = low_rank.LowRankAdded(base, a, b), low_rank.LowRankAdded(base, a, b, weight_only=True)
    assert isinstance(int8.down, Int8RowLinear) and isinstance(int8.up, Int8RowLinear) and dense.down is None
    with torch.no_grad():
        few = torch.randn(3, 64)
        added, want = int8(few) - base(few), dense(few) - base(few)
        assert not torch.equal(added, want)  # the int8 kernel ran
        assert (added - want).norm() / want.norm() < 0.03
        many = torch.randn(DENSE_ROWS + 4, 64)
        assert torch.equal(int8(many), dense(many))
