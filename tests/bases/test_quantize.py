"""int8 weights (quantize.py): an opt-in CPU path, checked against the model as loaded."""

import torch

from dllm_engine.checkpoint import load
from dllm_engine.layout import causal_mask
from dllm_engine.quantize import Int8Linear, quantize_int8


def test_int8_model_tracks_the_native_one_and_replaces_every_projection():
    ref = load("small", dtype=torch.float32)
    q = load("small", dtype=torch.float32)
    for m in (ref.model, q.model):
        m.fuse_projections()
    quantize_int8(q.model)
    assert all(isinstance(layer.self_attn.qkv, Int8Linear) and isinstance(layer.mlp.gate_up, Int8Linear)
               for layer in q.model.model.layers)
    ids = torch.tensor([ref.tokenizer.encode("def add(a, b):\n    return a + b\n")])
    pos = torch.arange(ids.shape[1])[None]
    mask = causal_mask(0, ids.shape[1], ids.device)
    with torch.inference_mode():
        want, _ = ref.model(ids, pos, mask=mask)
        got, _ = q.model(ids, pos, mask=mask)
    cos = torch.nn.functional.cosine_similarity(got.flatten(1), want.flatten(1)).item()
    assert got.dtype == want.dtype and cos > 0.98, cos
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
    assert agree > 0.5, agree  # activations are quantized per call too: argmax flips where the model is unsure


def test_engine_serves_fills_with_int8_weights():
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    e = Engine(EngineConfig(model="small", threads=1, weights="int8"))
    try:
        res = e.infill(InfillRequest(holes=[Hole(prefix="def f(x):\n    return ", suffix="\n", max_tokens=8)]))
        assert res.holes[0].passes >= 1 and res.holes[0].finish_reason in ("end", "max_tokens")
    finally:
        e.shutdown()
