import shutil
import subprocess
import sys
from pathlib import Path

import httpx

import pytest
import torch

from dllm_engine.checkpoint import SMALL_MODEL_DIR, save_native
from dllm_engine.default_model_config import default_model_config
from dllm_engine.model import DiffusionTransformer
from dllm_engine.tokenizer import TextTokenizer
from tcp_daemon import wait_healthy  # (pytest puts this folder on sys.path for its conftest)

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seeded_global_rng():
    """Every test draws torch's global RNG from the same start: a test's `torch.randn` inputs
    do not depend on which tests ran before it (test_row_buckets' bf16 sum once landed 0.054
    from fp32's against a 0.05 tolerance only after another test joined the run)."""
    torch.manual_seed(0)


def write_tiny_native(out: Path, seed: int = 0, **overrides) -> Path:
    """A small random native model with the real tokenizer, in the shipped on-disk format."""
    tok = TextTokenizer(SMALL_MODEL_DIR / "tokenizer.json")
    shape = dict(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128,
                 max_position_embeddings=1024)
    shape.update(overrides)
    cfg = default_model_config(tok, **shape)
    torch.manual_seed(seed)
    model = DiffusionTransformer(cfg)
    for p in model.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.3)  # peaky logits, so some tokens clear a threshold
    save_native(model, out, dtype=torch.float32)
    shutil.copy(SMALL_MODEL_DIR / "tokenizer.json", out / "tokenizer.json")
    return out


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return write_tiny_native(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tiny_shifted_model(tmp_path_factory) -> Path:
    """The same, as a shifted-logit model decoded in blocks of 1 (the default model's decoding)."""
    return write_tiny_native(tmp_path_factory.mktemp("shifted") / "model", seed=3, logits_shift=True, decode_block=1)


@pytest.fixture(scope="module")
def default_engine():
    """The engine on the shipped default model, one per test module."""
    from dllm_engine.engine import Engine, EngineConfig

    e = Engine(EngineConfig(threads=1))
    yield e
    e.shutdown()


@pytest.fixture(scope="module", params=["small", "shifted"])
def small_or_shifted_engine(request, tiny_shifted_model):
    """An engine per test module on each real model with an exact context cache: the small
    from-scratch one and the tiny shifted-logit one (the default model's decoding)."""
    from dllm_engine.engine import Engine, EngineConfig

    model = str(SMALL_MODEL_DIR) if request.param == "small" else str(tiny_shifted_model)
    e = Engine(EngineConfig(model=model, threads=1, dtype="float32"))
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def daemon(tiny_model, tmp_path_factory):
    """A real `dllm-lsp engine serve` on the tiny model, on its own Unix socket (yields the
    socket's path once /health answers), one per test module."""
    sock = tmp_path_factory.mktemp("run") / "engine.sock"
    log = open(sock.with_suffix(".log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "dllm_lsp", "engine", "serve", "--socket", str(sock),
                             "--model", str(tiny_model), "--threads", "1"], stdout=log, stderr=log)

    def health() -> int:
        with httpx.Client(base_url="http://e", transport=httpx.HTTPTransport(uds=str(sock))) as c:
            return c.get("/health").status_code

    wait_healthy(proc, health, sock.with_suffix(".log"), 60)
    yield sock
    proc.terminate()
    proc.wait(10)
