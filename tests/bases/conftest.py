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
