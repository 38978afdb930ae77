"""The engine's Triton path (under TRITON_INTERPRET=1 on the CPU) gives the torch path's logits."""

import os

import pytest
import torch

from dllm_engine.checkpoint import load
from dllm_engine.runner import ModelRunner

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="Triton on the CPU needs TRITON_INTERPRET=1 (set by .ci/run)")


@pytest.mark.parametrize("fused", [False, True], ids=["separate-projections", "fused-projections"])
@torch.inference_mode()
def test_triton_canvas_pass_matches_torch(tiny_model, fused):
    lm = load(str(tiny_model))
    if fused:  # what the engine runs: q/k/v and gate/up as one GEMM each, strided views into them
        lm.model.fuse_projections()
    tok = lm.tokenizer
    runner = ModelRunner(lm, cache_bytes=1 << 26)
    ctxs = [runner.encode_context(tok.encode(p), tok.encode("\n    return y\n"), 16)
            for p in ("def f(x):\n    y = ", "import os\nclass A:\n    def g(self):\n        y = ")]
    canv = torch.full((2, 8), lm.config.mask_token_id)
    canv[0, 2] = tok.encode(" x")[0]
    lens = torch.tensor([8, 5])
    ref = runner.canvas_logits(ctxs, canv, lens).clone()
    lm.model.use_kernels("triton")
    runner.forget_batch()
    got = runner.canvas_logits(ctxs, canv, lens)
    lm.model.use_kernels(None)
    torch.testing.assert_close(got[0], ref[0], atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(got[1, :5], ref[1, :5], atol=2e-3, rtol=2e-3)


@torch.inference_mode()
def test_triton_delayed_canvas_pass_matches_torch(tiny_model):
    lm = load(str(tiny_model))
    lm.model.fuse_projections()
    tok = lm.tokenizer
    runner = ModelRunner(lm, cache_bytes=1 << 26)
    ctxs = [runner.encode_context(tok.encode(p), tok.encode("\n"), 16) for p in ("x = ", "def g():\n    ")]
    canv = torch.full((2, 8), lm.config.mask_token_id)
    canv[0, :2] = torch.tensor(tok.encode(" 1 +")[:2])
    lens = torch.tensor([8, 8])
    masked = canv == lm.config.mask_token_id
    ref, _ = runner.canvas_logits_delayed(ctxs, canv, lens, masked, torch.ones_like(masked), [None, None])
    ref = ref.clone()
    lm.model.use_kernels("triton")
    runner.forget_batch()
    got, _ = runner.canvas_logits_delayed(ctxs, canv, lens, masked, torch.ones_like(masked), [None, None])
    lm.model.use_kernels(None)
    torch.testing.assert_close(got, ref, atol=2e-3, rtol=2e-3)
