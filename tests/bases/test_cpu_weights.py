"""The default model's CPU weights: "auto" takes the base's own choice (int4 for SmolLM2,
whose GGUF projections are all Q4_1), explicit choices and other models are left as they are."""

import pytest

from dllm_engine.weight_only import Int4Linear, Int8RowLinear, int4_available


@pytest.mark.skipif(not int4_available(), reason="this torch has no CPU weight-only kernels")
def test_auto_runs_the_default_model_in_int4_on_a_cpu(base_engine):
    assert base_engine.weights == "int4" and base_engine.health()["weights"] == "int4"
    layer = base_engine.loaded.model.model.layers[0]
    assert isinstance(layer.self_attn.qkv, Int4Linear) and isinstance(layer.mlp.down_proj, Int4Linear)
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
