"""The default model's CPU weights: "auto" takes the base's own choice (int4 for SmolLM2,
whose GGUF projections are all Q4_1), explicit choices and other models are left as they are."""

import pytest
import torch

from dllm_engine.low_rank import LowRankAdded
from dllm_engine.weight_only import Int4Linear, Int8RowLinear, int4_available


@pytest.mark.skipif(not int4_available(), reason="this torch has no CPU weight-only kernels")
def test_auto_runs_the_default_model_in_int4_on_a_cpu(base_engine):
    health = base_engine.health()
    assert base_engine.weights == "int4" and health["weights"] == "int4"
    assert health["base_adapter"] == {"rank": 16, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"], "steps": 60}
    layer = base_engine.loaded.model.model.layers[0]
    # The shipped adapter (bases/lora/, attention only) runs beside the int4 products, not in them.
    assert isinstance(layer.self_attn.qkv, LowRankAdded) and isinstance(layer.self_attn.qkv.base, Int4Linear)
    assert isinstance(layer.self_attn.qkv.down, Int8RowLinear)  # the adapter's factors through int8 kernels too
    assert isinstance(layer.mlp.gate_up, Int4Linear) and isinstance(layer.mlp.down_proj, Int4Linear)
    assert isinstance(base_engine.loaded.model.lm_head, Int8RowLinear)
    assert base_engine.loaded.config.extra["cpu_weights"] == "int4"


def test_explicit_weights_and_the_small_model_stay_native():
    from dllm_engine.engine import Engine, EngineConfig

    small = Engine(EngineConfig(model="small", threads=1))
    try:
        assert small.weights == "native"  # no cpu_weights in its config
    finally:
        small.shutdown()
    with pytest.raises(ValueError, match="weights must be"):
        EngineConfig(weights="int3")


@pytest.mark.skipif(not int4_available(), reason="this torch has no CPU weight-only kernels")
def test_a_second_load_reads_the_packed_int4_file_and_fills_the_same(base_engine):
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    # Written by the first int4 load, one per torch version and dtype (a run at another dtype
    # leaves its own beside it in the user's cache).
    packed = base_engine.loaded.path / f"int4-packed-torch{torch.__version__}-{base_engine.config.dtype}.safetensors"
    assert packed.exists(), sorted(p.name for p in base_engine.loaded.path.glob("int4-packed-*"))
    hole = Hole(prefix="def mean(values):\n    return ", suffix="\n", max_tokens=16, stop=("\n",))
    again = Engine(EngineConfig(model="default", threads=1))
    try:
        first = base_engine.infill(InfillRequest(holes=[hole])).holes[0]
        second = again.infill(InfillRequest(holes=[hole])).holes[0]
        assert second.text == first.text and first.text
        # 16 rows at once (drafts): the kernels' aligned loads on tensors read from the file
        # crashed before they were copied out of its buffer
        head = again.loaded.model.lm_head
        rows = torch.randn(16, head.q.shape[1], dtype=head.scale.dtype)
        torch.testing.assert_close(head(rows), base_engine.loaded.model.lm_head(rows))
        layer0 = again.loaded.model.model.layers[0].mlp.gate_up
        assert torch.equal(layer0.packed, base_engine.loaded.model.model.layers[0].mlp.gate_up.packed)
    finally:
        again.shutdown()
