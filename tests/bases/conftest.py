import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def base_engine():
    """The engine on the new default model (a pretrained base in our layout). Its first load
    builds the weight cache (~15 s on 2 cores); later sessions memory-map it."""
    from dllm_engine.engine import Engine, EngineConfig

    e = Engine(EngineConfig(model="default", threads=1))
    yield e
    e.shutdown()


@pytest.fixture(scope="session")
def fp32_engine():
    """The default model with fp32 weights ("auto" would run int4, through bf16 kernels below 8
    rows, whose sums round with the row count): the tests that compare fills token for token
    share it (its context cache changes no output, only the time)."""
    from dllm_engine.engine import Engine, EngineConfig

    e = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native"))
    yield e
    e.shutdown()
