"""The shipped default model through the engine: it loads from the package, fills, scores, caches."""

import pytest

from dllm_engine.checkpoint import SMALL_MODEL_DIR
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest, ScoreRequest

PREFIX = "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n    return "
SUFFIX = "\n\n\nprint(mean([1, 2, 3]))\n"


@pytest.fixture(scope="module")
def engine(default_engine):
    return default_engine


def test_default_model_is_the_shipped_checkpoint(engine):
    assert engine.loaded.path == SMALL_MODEL_DIR
    assert engine.model_name == "small"
    assert (SMALL_MODEL_DIR / "model.safetensors").stat().st_size <= 40 * 2**20


def test_default_model_fills_and_reuses_its_cache(engine):
    first = engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=16)]))
    h = first.holes[0]
    assert h.finish_reason in ("end", "max_tokens") and h.passes >= 1
    assert "<pad>" not in h.text and "<mask>" not in h.text
    again = engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX + "t", suffix=SUFFIX, max_tokens=16)]))
    assert again.cached_tokens >= again.context_tokens - 3  # one typed character: only the tail is encoded
    one_per_pass = engine.infill(InfillRequest(holes=[Hole(prefix=PREFIX, suffix=SUFFIX, max_tokens=16)],
                                               params=DiffusionParams(threshold=1.5)))
    assert one_per_pass.holes[0].committed_per_pass == [1] * one_per_pass.holes[0].passes


def test_default_model_scores_existing_code(engine):
    r = engine.score(ScoreRequest(prefix="def mean(values):\n", span="    return sum(values) / len(values)\n"))
    assert "".join(t.text for t in r.tokens) == "    return sum(values) / len(values)\n"


def test_loading_does_not_pay_for_torch_compile_machinery():
    """Cold start: building the model on meta must not import torch._dynamo (~1.3 s on these CPUs),
    which a meta arange or nn.init call does on first use. A fresh interpreter, so nothing was imported before."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from dllm_engine.engine import Engine, EngineConfig\n"
            "from dllm_engine.protocol import Hole, InfillRequest\n"
            "e = Engine(EngineConfig(threads=1))\n"
            "e.infill(InfillRequest(holes=[Hole('def f(x):\\n    return ', '\\n', 4)]))\n"
            "e.shutdown()\n"
            "print('torch._dynamo' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
